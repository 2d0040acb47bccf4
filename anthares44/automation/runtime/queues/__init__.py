"""Queues (§10.1, §10.2) and the dead-letter queue (§10.3, §10.4): storing published queue files, the gauges
(`queue_stats`), raw envelope delivery (`deliver_envelope`, E_ENVELOPE_INVALID), and the DLQ operations
(`dlq_list`, `dlq_stats`, `dlq_show`, `dlq_redrive`). Limits and ordering are enforced by the claim (runtime/store/queries/
leases.sql); redelivery and dead-lettering of failed runs by the interpreter (`engine_op_queue_run_failed`,
migration 0018).
See docs/queues.md."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ...durations import parse_duration, parse_rate
from ...errors import E_DLQ_FILTER, E_DLQ_NOT_FOUND, E_ENVELOPE_INVALID, E_INVALID_ARGUMENT, E_QUEUE_NOT_FOUND, A44Error
from ...jsonenc import iso
from .. import evaluation
from ..buffers import intake
from ..ingestion.dead_letters import dead_letter
from ..ingestion.ids import new_event_id
from ..ingestion.runs import create_run_in

if TYPE_CHECKING:
    from ..store.core import Store

DEFAULT_QUEUE = "q_default"
ENVELOPE_FIELDS = ("id", "type", "idempotency_key", "occurred_at", "data")
# what a --filter may read: the DLQ row
FILTER_ROOTS = {"error_code", "error_message", "step_id", "data", "envelope", "attempts", "history", "queue",
                "workflow_id", "trigger_id", "event_id", "run_id", "partition_key", "created_at", "age_seconds",
                "dead_letter_id", "redrive_of"}


def _bad(message: str, hint: str | None = None) -> A44Error:
    return A44Error(E_INVALID_ARGUMENT, message, hint=hint)


# --- publishing -----------------------------------------------------------------------------------------------
async def store_queues(store: Store, project: str, queues: list) -> list[tuple[str, str]]:
    """Upsert published Queue models; returns [(queue_id, created|updated|unchanged)]."""
    out = []
    now = store.clock.now()
    for q in queues:
        d = q.model_dump(mode="json", exclude_none=True)
        dl = q.deadLetter
        max_age = None
        if dl is not None and dl.maxAge is not None:     # a Duration is milliseconds once validated
            max_age = int(dl.maxAge)
        outcome = await store.fetchval("queue_upsert", project=project, queue_id=q.id, max_concurrency=q.maxConcurrency,
                                       ordering=q.ordering, max_attempts=q.maxAttempts,
                                       dead_letter=dl.enabled if dl is not None else True, max_age=max_age,
                                       definition=json.dumps(d, sort_keys=True), now=now)
        out.append((q.id, outcome))
    return out


# --- gauges (§16: age of the oldest message per queue, DLQ depth) --------------------------------------------
async def queue_stats(store: Store, project: str) -> list[dict]:
    rows = await store.fetch("queues_stats", project=project, now=store.clock.now())
    return [{"queue": r["queue"], "published": r["published"], "max_concurrency": r["max_concurrency"],
             "ordering": r["ordering"], "max_attempts": r["max_attempts"], "max_age_ms": r["max_age_ms"],
             "in_flight": r["in_flight"], "waiting": r["waiting"],
             "oldest_waiting_age_s": None if r["oldest_waiting_age_s"] is None
             else round(float(r["oldest_waiting_age_s"]), 3),
             "dlq_depth": r["dlq_depth"]} for r in rows]


async def require_queue(store: Store, project: str, queue: str) -> None:
    if not await store.fetchval("dlq_queue_known", project=project, queue=queue):
        raise A44Error(E_QUEUE_NOT_FOUND, f"no queue {queue!r} in {project}",
                       hint="`a44 automation queues stats` lists the queues; publish the queue file first")


# --- raw envelopes (§10.3: an envelope that cannot be deserialized) -------------------------------------------
def parse_envelope(raw: bytes | str) -> dict:
    """The envelope as a dict, or A44Error(E_ENVELOPE_INVALID) saying why not."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
        env = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise A44Error(E_ENVELOPE_INVALID, f"the envelope is not JSON: {exc}") from None
    if not isinstance(env, dict):
        raise A44Error(E_ENVELOPE_INVALID, "the envelope is not a JSON object")
    missing = [f for f in ENVELOPE_FIELDS if f not in env]
    if missing:
        raise A44Error(E_ENVELOPE_INVALID, f"the envelope lacks {', '.join(missing)}")
    if not isinstance(env["idempotency_key"], str) or not env["idempotency_key"]:
        raise A44Error(E_ENVELOPE_INVALID, "`idempotency_key` must be a non-empty string")
    return env


async def _create_from_envelope(conn, store: Store, project: str, workflow_id: str, env: dict, *, key: str,
                                queue: str, trigger_id: str | None, event_id: str | None,
                                partition_key: str | None, now: datetime) -> tuple[str, bool]:
    made = await create_run_in(conn, project, workflow_id, None, env.get("data"), key, trigger_id=trigger_id,
                               event_id=event_id, partition_key=partition_key, queue=queue, now=now)
    return made.run_id, made.created


async def deliver_envelope(store: Store, project: str, workflow_id: str, raw: bytes | str, *,
                           trigger_id: str | None = None) -> dict:
    """Enqueue a raw envelope (bytes as received) for a workflow: a run when it deserializes, else a dead letter
    with E_ENVELOPE_INVALID and the bytes kept as they came. Returns {outcome, run_id | dead_letter_id}."""
    row = await store.fetchrow("dlq_workflow_queue", project=project, workflow_id=workflow_id)
    if row is None:
        from ...errors import E_WORKFLOW_NOT_FOUND
        raise A44Error(E_WORKFLOW_NOT_FOUND, f"{workflow_id} is not published in {project}")
    queue = row["queue"]
    now = store.clock.now()
    try:
        return await _deliver(store, project, workflow_id, raw, queue, trigger_id, now)
    except intake.KeyHeld as held:       # a buffered envelope whose key an earlier one holds: nothing was kept
        return {"outcome": "deduplicated", **await intake.held_by(store, project, str(held), now)}


async def _deliver(store: Store, project: str, workflow_id: str, raw: bytes | str, queue: str,
                   trigger_id: str | None, now: datetime) -> dict:
    async with store.transaction("deliver_envelope") as conn:
        try:
            env = parse_envelope(raw)
        except A44Error as err:
            dl = await dead_letter(conn, project, queue, workflow_id, trigger_id, raw, err, now)
            return {"outcome": "dead_lettered", "dead_letter_id": dl, "error_code": err.code}
        # the envelope is kept as received (automation.events), so a later dead letter carries it byte for byte
        event_id = new_event_id(now)
        try:
            occurred = datetime.fromisoformat(str(env["occurred_at"]).replace("Z", "+00:00"))
            if occurred.tzinfo is None:
                raise ValueError
        except ValueError:
            occurred = now
        text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
        pk = env.get("partition_key") if isinstance(env.get("partition_key"), str) else None
        await conn.execute("event_insert", event_id=event_id, project=project, type=str(env["type"]),
                           idempotency_key=env["idempotency_key"], partition_key=pk, trigger_id=trigger_id,
                           source="bus", occurred_at=occurred, now=now, envelope=text)
        latest = await conn.fetchrow("version_latest", project=project, workflow_id=workflow_id)
        ir = json.loads(latest["ir"]) if latest is not None and isinstance(latest["ir"], str) else \
            (latest["ir"] if latest is not None else {})
        key = f"{trigger_id or 'envelope'}:{env['idempotency_key']}"
        if ir.get("buffer"):        # debounce / batch: the envelope joins its key's buffer (runtime/buffers)
            stored = {**env, "id": event_id, "occurred_at": iso(occurred)}
            done = await intake.deliver(conn, project, workflow_id, ir, trigger_id=trigger_id, env=stored,
                                        raw=text, partition_key=pk, now=now, record_delivery=False, key=key)
            return {k: done[k] for k in ("outcome", "run_id", "buffer_id", "dead_letter_id", "error_code")
                    if k in done}
        run_id, created = await _create_from_envelope(
            conn, store, project, workflow_id, env, key=key, queue=queue, trigger_id=trigger_id, event_id=event_id, partition_key=pk, now=now)
    return {"outcome": "created" if created else "deduplicated", "run_id": run_id}


# --- DLQ ------------------------------------------------------------------------------------------------------
def parse_since(since: str | timedelta | datetime | None, now: datetime) -> datetime:
    if since is None:
        return datetime.min.replace(tzinfo=now.tzinfo)
    if isinstance(since, datetime):
        return since
    try:
        return now - parse_duration(since)
    except ValueError as exc:
        raise _bad(str(exc), "e.g. --since 24h") from None


async def dlq_list(store: Store, project: str, queue: str | None = None, limit: int = 50) -> list[dict]:
    """Dead letters newest first, of every queue or of one."""
    if queue is not None:
        await require_queue(store, project, queue)
    return [dict(r) for r in await store.fetch("dlq_list", project=project, queue=queue, limit=limit)]


async def dlq_stats(store: Store, project: str, queue: str, since=None) -> dict:
    await require_queue(store, project, queue)
    now = store.clock.now()
    start = parse_since(since, now)
    rows = await store.fetch("dlq_stats", project=project, queue=queue, start=start)
    groups = [{"error_code": r["error_code"], "count": r["count"], "waiting": r["waiting"],
               "first_seen": iso(r["first_seen"]), "last_seen": iso(r["last_seen"])} for r in rows]
    return {"queue": queue, "since": iso(start) if since is not None else None,
            "total": sum(g["count"] for g in groups), "by_error_code": groups}


def _row_view(r, *, with_attempts: bool) -> dict:
    d = {k: r[k] for k in ("dead_letter_id", "project_id", "queue", "trigger_id", "workflow_id", "event_id",
                           "run_id", "version", "partition_key", "error_code", "error_message", "step_id",
                           "attempts", "redrive_of", "redriven_run_id")}
    d["created_at"] = iso(r["created_at"])
    d["redriven_at"] = iso(r["redriven_at"]) if r["redriven_at"] else None
    d["envelope"] = r["envelope"]
    if r["envelope_bytes"] is not None:
        d["envelope_bytes_hex"] = bytes(r["envelope_bytes"]).hex()
    d["last_error"] = {"code": r["error_code"], "message": r["error_message"], "step": r["step_id"]}
    if with_attempts:
        h = r["history"]
        d["history"] = [_history_z(delivery) for delivery in (json.loads(h) if isinstance(h, str) else (h or []))]
    return d


def _history_z(delivery: dict) -> dict:
    """A delivery of the stored history with its attempts' instants in the one format of every output (`Z`): the
    history was written by PostgreSQL's jsonb, which says `+00:00`."""
    def z(v):
        return iso(datetime.fromisoformat(v)) if isinstance(v, str) else v

    attempts = [{**a, **{k: z(a.get(k)) for k in ("started_at", "finished_at") if k in a}}
                for a in delivery.get("attempts") or []]
    return {**delivery, "attempts": attempts} if "attempts" in delivery else delivery


async def dlq_show(store: Store, project: str, dead_letter_id: str, *, with_attempts: bool = False) -> dict:
    r = await store.fetchrow("dlq_get", dead_letter_id=dead_letter_id, project=project)
    if r is None:
        raise A44Error(E_DLQ_NOT_FOUND, f"no dead letter {dead_letter_id} in {project}",
                       hint="`a44 automation dlq stats Q` counts them; `events dlq` lists them")
    return _row_view(r, with_attempts=with_attempts)


def envelope_bytes(view_or_row) -> bytes:
    """The original envelope exactly as received."""
    hexed = view_or_row.get("envelope_bytes_hex") if isinstance(view_or_row, dict) else None
    if hexed:
        return bytes.fromhex(hexed)
    return view_or_row["envelope"].encode("utf-8")


@dataclass
class FilterDiagnostic:
    code: str
    message: str
    column: int            # 1-based column in the filter text
    length: int
    hint: str | None = None

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "column": self.column, "length": self.length,
                "hint": self.hint}

    def __str__(self) -> str:
        return f"--filter:1:{self.column}: {self.code} {self.message}" + (f" (hint: {self.hint})" if self.hint else "")


def compile_filter(text: str | None):
    """CEL over the DLQ row (FILTER_ROOTS), boolean. A44Error(E_DLQ_FILTER) with diagnostics (column) when wrong."""
    if text is None or text.strip() == "":
        return None
    from ...grammar import compile_expression

    res = compile_expression(text, roots=FILTER_ROOTS, expect_bool=True)
    if res.program is None:
        diags = [FilterDiagnostic(i.code, i.message, i.offset + 1, i.length, i.hint) for i in res.issues
                 if i.severity == "error"]
        raise A44Error(E_DLQ_FILTER, "the --filter expression is not valid: " + "; ".join(str(d) for d in diags),
                       hint=f"CEL over the DLQ row: {', '.join(sorted(FILTER_ROOTS))}",
                       details={"diagnostics": [d.to_dict() for d in diags], "filter": text})
    return res.program


def filter_activation(r, now: datetime) -> dict:
    try:
        env = json.loads(r["envelope"])
    except ValueError:
        env = None
    h = r["history"]
    hist = json.loads(h) if isinstance(h, str) else (h or [])
    return {"error_code": r["error_code"], "error_message": r["error_message"] or "", "step_id": r["step_id"] or "",
            "data": env.get("data") if isinstance(env, dict) else None, "envelope": env,
            "attempts": r["attempts"], "history": hist, "queue": r["queue"] or "", "workflow_id": r["workflow_id"] or "",
            "trigger_id": r["trigger_id"] or "", "event_id": r["event_id"] or "", "run_id": r["run_id"] or "",
            "partition_key": r["partition_key"] or "", "created_at": r["created_at"].isoformat(),
            "age_seconds": (now - r["created_at"]).total_seconds(), "dead_letter_id": r["dead_letter_id"],
            "redrive_of": r["redrive_of"] or ""}


@dataclass
class RedriveReport:
    queue: str
    dry_run: bool
    matched: int = 0
    redriven: int = 0
    dead_lettered_again: int = 0          # an envelope that still does not deserialize (new DLQ entry)
    skipped_taken: int = 0                # taken by a concurrent redrive
    scanned: int = 0
    elapsed_s: float = 0.0
    runs: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"queue": self.queue, "dry_run": self.dry_run, "scanned": self.scanned, "matched": self.matched,
                "redriven": self.redriven, "dead_lettered_again": self.dead_lettered_again,
                "skipped_taken": self.skipped_taken, "elapsed_s": round(self.elapsed_s, 3),
                "rate_observed_per_s": round(self.redriven / self.elapsed_s, 2) if self.elapsed_s > 0 else None,
                "runs": self.runs}


async def dlq_redrive(store: Store, project: str, queue: str, *, filter: str | None = None, rate=None,
                      max: int | None = None, dry_run: bool = False,
                      progress: Callable[[int, int | None], None] | None = None) -> RedriveReport:
    """Re-enqueue the original envelope of every waiting (not yet redriven) dead letter of `queue` that matches
    `filter`, oldest first, at most `rate` per second and `max` in all. Each redrive is one transaction: the new
    run (idempotency key `dlq:<entry>`, linked to the entry) and the entry marked redriven, so an interrupted
    redrive run again never redrives an entry twice."""
    program = compile_filter(filter)          # diagnostics before anything else
    try:
        per_s = parse_rate(rate)
    except ValueError as exc:
        raise _bad(str(exc), "e.g. --rate 20/s (or 600/m)") from None
    if max is not None and max < 0:
        raise _bad(f"--max must not be negative, got {max}")
    await require_queue(store, project, queue)
    report = RedriveReport(queue, dry_run)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    after = (datetime.min.replace(tzinfo=store.clock.now().tzinfo), "")
    limit = max if max is not None else None
    # the entries this redrive itself made (an envelope that still does not deserialize goes back to the DLQ as a
    # new entry, later in the scan's order): taking them up again would never end
    made: set[str] = set()
    while limit is None or report.matched < limit:
        page = await store.fetch("dlq_page", project=project, queue=queue, after_at=after[0], after_id=after[1],
                                 limit=500)
        if not page:
            break
        for r in page:
            after = (r["created_at"], r["dead_letter_id"])
            if r["dead_letter_id"] in made:
                continue
            report.scanned += 1
            if program is not None:
                try:
                    ok = await evaluation.evaluate(program, filter_activation(r, store.clock.now()),
                                                   evaluation.INGESTION_TIMEOUT_S) is True
                except Exception:  # noqa: BLE001 - a row the filter cannot read does not match
                    ok = False
                if not ok:
                    continue
            if limit is not None and report.matched >= limit:
                break
            report.matched += 1
            if dry_run:
                report.runs.append({"dead_letter_id": r["dead_letter_id"], "error_code": r["error_code"]})
                continue
            if per_s is not None:      # the n-th redrive not before t0 + n / rate
                wait = t0 + report.redriven / per_s - loop.time()
                if wait > 0:   # wall: --rate bounds the load on the far sides in real seconds
                    await asyncio.sleep(wait)
            again = await _redrive_one(store, project, r, report)
            if again is not None:
                made.add(again)
            if progress is not None:
                progress(report.redriven + report.dead_lettered_again, limit)
    report.elapsed_s = loop.time() - t0
    return report


async def _redrive_one(store: Store, project: str, r, report: RedriveReport) -> str | None:
    """Redrive entry `r`; the id of the new entry when its envelope went back to the DLQ, else None."""
    try:
        return await _redrive_tx(store, project, r, report)
    except _Taken:      # a concurrent redrive took this entry first: its run stands, ours rolled back
        report.skipped_taken += 1
        return None


async def _redrive_tx(store: Store, project: str, r, report: RedriveReport) -> str | None:
    now = store.clock.now()
    dl_id = r["dead_letter_id"]
    async with store.transaction("dlq_redrive") as conn:
        raw = bytes(r["envelope_bytes"]) if r["envelope_bytes"] is not None else r["envelope"]
        try:
            env = parse_envelope(raw)
        except A44Error as err:
            taken = await conn.fetchval("dlq_mark_redriven", dead_letter_id=dl_id, now=now, run_id=None)
            if taken is None:
                report.skipped_taken += 1
                return None
            new = await dead_letter(conn, project, r["queue"], r["workflow_id"], r["trigger_id"], raw, err, now,
                                    redrive_of=dl_id, event_id=r["event_id"], attempts=r["attempts"])
            report.dead_lettered_again += 1
            report.runs.append({"dead_letter_id": dl_id, "dead_letter_again": new})
            return new
        if r["workflow_id"] is None:
            raise A44Error(E_DLQ_NOT_FOUND, f"dead letter {dl_id} names no workflow to redrive to")
        run_id, _created = await _create_from_envelope(
            conn, store, project, r["workflow_id"], env, key=f"dlq:{dl_id}", queue=r["queue"],
            trigger_id=r["trigger_id"], event_id=r["event_id"],
            partition_key=r["partition_key"] or env.get("partition_key"), now=now)
        taken = await conn.fetchval("dlq_mark_redriven", dead_letter_id=dl_id, now=now, run_id=run_id)
        if taken is None:
            raise _Taken()
        await conn.execute("dlq_link_run", run_id=run_id, dead_letter_id=dl_id)
    report.redriven += 1
    report.runs.append({"dead_letter_id": dl_id, "run_id": run_id})
    return None


class _Taken(Exception):
    pass
