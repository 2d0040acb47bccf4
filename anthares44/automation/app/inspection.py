"""What an operator inspects a run with (the web console reads these; the CLI's `runs` and `logs` read their
simpler cousins on `Automation`): a keyset-paged, filtered search of runs with a bounded total, one run (a keyset
page of its attempts, the step graph of its version, its replays, its trace id), and one attempt's redacted result.

    page = await search_runs(auto, RunSearch(state="failed", error_code="E_UPSTREAM_503"), limit=50)
    more = await search_runs(auto, RunSearch(state="failed"), limit=50, after=page["next"])
    doc = await run_detail(auto, "run_01J9...")                      # first page of its attempts
    one = await attempt_result(auto, "run_01J9...", step_id="fetch", epoch=0, kind="action", attempt=1)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, fields
from datetime import UTC, datetime

from ..errors import E_ATTEMPT_NOT_FOUND, E_RESULT_UNAVAILABLE, A44Error
from ..redact import redact
from ..runtime.store.core import RUN_STATES
from ..tracing import run_trace_id
from .automation import InvalidArgument, workflow_ref
from .logs import instant
from .views import attempt_view, run_view

TOTAL_CAP = 10_000       # the total is exact up to this many runs, "10,000+" beyond: counting millions is not free
MAX_PAGE = 500
ATTEMPTS_PAGE = 100                # attempts one run page lists; `attempts_next` continues
INLINE_SHOWN_BYTES = 4096          # inline results up to this size ride along with the page, larger on demand
SHOWN_MAX_BYTES = 8 * 1024 * 1024  # a result the console renders at most (larger: runs show / REST)
__all__ = ["RUN_STATES", "RunSearch", "attempt_result", "run_detail", "search_runs"]


@dataclass(frozen=True)
class RunSearch:
    """The runs page's filters; None leaves a filter out. `since` / `until` are ages (`24h`) or instants."""

    workflow: str | None = None
    state: str | None = None
    step: str | None = None
    error_code: str | None = None
    partition_key: str | None = None
    since: str | datetime | None = None
    until: str | datetime | None = None

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def encode_cursor(row: dict) -> str:
    """The position after `row` in the newest-first order: microseconds since the epoch and the run id."""
    at = row["created_at"]
    return f"{int(at.timestamp() * 1_000_000)}.{row['run_id']}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    us, _, run_id = cursor.partition(".")
    if not us.isdigit() or not run_id or len(us) > 19:
        raise InvalidArgument(f"bad page cursor {cursor!r}", hint="follow the page's `next` link")
    return datetime.fromtimestamp(int(us) / 1_000_000, tz=UTC), run_id


async def search_runs(auto, search: RunSearch, *, limit: int = 50, after: str | None = None) -> dict:
    """{total, total_capped, runs, next}: runs newest first after the cursor `after`; `next` continues (None at
    the end). The total counts every match (not only this page's), exactly up to TOTAL_CAP."""
    if search.state is not None and search.state not in RUN_STATES:
        raise InvalidArgument(f"unknown run state {search.state!r}", hint=f"known states: {', '.join(RUN_STATES)}")
    if not 0 < limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be between 1 and {MAX_PAGE}")
    now = auto.store.clock.now()
    where = dict(project=auto.project, state=search.state,
                 workflow=workflow_ref(search.workflow) if search.workflow else None, step=search.step,
                 error_code=search.error_code, partition_key=search.partition_key,
                 since=instant("since", search.since, now) if search.since else None,
                 until=instant("until", search.until, now) if search.until else None)
    before_at, before_id = decode_cursor(after) if after else (None, None)
    total = await auto.store.fetchval("runs_search_count", **where, cap=TOTAL_CAP + 1)
    rows = [dict(r) for r in await auto.store.fetch("runs_search", **where, before_at=before_at,
                                                     before_id=before_id, limit=limit + 1)]
    more = len(rows) > limit
    rows = rows[:limit]
    return {"total": min(total, TOTAL_CAP), "total_capped": total > TOTAL_CAP, "runs": [run_view(r, now) for r in rows],
            "next": encode_cursor(rows[-1]) if more and rows else None}


async def run_detail(auto, run_id: str, *, limit: int = ATTEMPTS_PAGE, after: str | None = None) -> dict:
    """{run, attempts, attempts_total, attempts_next, latest, graph, epochs, trace_id}: the run (input/result
    redacted); one keyset page of its attempts in start order with their metadata, each with its result (redacted)
    only when it sits inline in the row and is small (`attempt_result` reads any other on demand: a page never
    touches the object store); the latest attempt of each step in the current epoch; the nodes and edges of the
    IR of the run's version; the replays it went through."""
    if not 0 < limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be between 1 and {MAX_PAGE}")
    run = await auto.get_run(run_id)
    run["input"], run["result"] = redact(run.get("input")), redact(run.get("result"))
    store = auto.store
    at, attempt, step, epoch, kind = decode_attempt_cursor(after) if after else (None,) * 5
    rows = [dict(r) for r in await store.fetch("attempts_page", run_id=run_id, inline_max=INLINE_SHOWN_BYTES,
                                                after_at=at, after_attempt=attempt, after_step=step,
                                                after_epoch=epoch, after_kind=kind, limit=limit + 1)]
    more = len(rows) > limit
    rows = rows[:limit]
    attempts = []
    for row in rows:
        doc = attempt_view(row)
        doc["result"] = redact(row["result"]) if row.get("result") is not None else None
        doc["result_stored"] = row["result_stored"]
        attempts.append(doc)
    latest = [dict(r) for r in await store.fetch("attempts_latest_per_step", run_id=run_id, epoch=run["epoch"] or 0)]
    version = await store.get_version(auto.project, run["workflow_id"], run["version"])
    ir = version["ir"]
    graph = {"nodes": [{"id": n["id"], "kind": n.get("kind"), "index": n.get("index"),
                        "uses": (n.get("connector") or {}).get("uses")} for n in ir.get("nodes", [])],
             "edges": [list(e) for e in ir.get("edges", [])]}
    epochs = [{"at": r["at"], **(r["data"] if isinstance(r["data"], dict) else {})}
              for r in await store.fetch("run_epochs", run_id=run_id)]
    return {"run": run, "attempts": attempts, "attempts_total": await store.fetchval("attempts_count_of_run",
                                                                                     run_id=run_id),
            "attempts_next": encode_attempt_cursor(rows[-1]) if more and rows else None, "latest": latest,
            "graph": graph, "epochs": epochs, "trace_id": f"{run_trace_id(run_id):032x}"}


def encode_attempt_cursor(row: dict) -> str:
    """The position after `row` in start order: microseconds, attempt, epoch, kind, then the step id (last:
    code workflows' step ids may hold dots)."""
    return f"{int(row['started_at'].timestamp() * 1_000_000)}.{row['attempt']}.{row['epoch']}.{row['kind']}." \
           f"{row['step_id']}"


def decode_attempt_cursor(cursor: str) -> tuple:
    parts = cursor.split(".", 4)
    if len(parts) != 5 or not all(p.isdigit() and len(p) <= 19 for p in parts[:3]) or not parts[3] or not parts[4]:
        raise InvalidArgument(f"bad attempts cursor {cursor!r}", hint="follow the page's `next` link")
    us, attempt, epoch, kind, step = parts
    return (datetime.fromtimestamp(int(us) / 1_000_000, tz=UTC), int(attempt), step, int(epoch), kind)


async def attempt_result(auto, run_id: str, *, step_id: str, epoch: int, kind: str, attempt: int) -> dict:
    """{attempt, result, shown}: one attempt of a run with its result redacted by key name, read from the object
    store (off the event loop) when the row holds a reference; a result over SHOWN_MAX_BYTES is not read
    (`shown` false), so one request never renders more than that."""
    await auto.get_run(run_id)
    row = await auto.store.fetchrow("attempt_result_row", run_id=run_id, step_id=step_id, epoch=epoch, kind=kind,
                                    attempt=attempt)
    if row is None:
        raise A44Error(E_ATTEMPT_NOT_FOUND, f"run {run_id} has no attempt {attempt} of step {step_id!r} "
                                            f"(epoch {epoch}, {kind})")
    row = dict(row)
    doc = {"attempt": attempt_view(row), "result": None, "shown": True, "shown_max_bytes": SHOWN_MAX_BYTES}
    if (row.get("result_bytes") or 0) > SHOWN_MAX_BYTES:
        doc["shown"] = False
    elif row.get("result_ref"):
        try:
            doc["result"] = redact(await asyncio.to_thread(auto.store.load_result, row))
        except (A44Error, OSError, ValueError):   # the cause names files of the server: not for the page
            raise A44Error(E_RESULT_UNAVAILABLE, f"the result of attempt {attempt} of step {step_id!r} cannot be "
                                                 f"read from the object store (missing or corrupt)",
                           hint="its object may have been deleted from the object store") from None
    elif row.get("result") is not None:
        doc["result"] = redact(row["result"])
    return doc
