"""`Automation`: the application functions behind the CLI and the REST API for one project: publish,
run, wait, runs, logs, follow, partitions and skip. One async API; the CLI calls it through `asyncio.run`.

    async with await Automation.connect(project="pj_checkout_prod") as auto:
        report = await auto.publish(["workflows/"])
        handle = await auto.run("wf_invoice_settle", {"invoiceId": "inv_8812"}, "manual-inv_8812-2026-07-19")
        async for event in auto.follow(handle.run_id):
            ...

Everything here goes through the `Store` (the only code that speaks SQL); waiting uses LISTEN/NOTIFY
(`watch.py`), never a busy loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..durations import parse_duration
from ..errors import E_IDEMPOTENCY_KEY_REQUIRED, E_INVALID_ARGUMENT, A44Error
from ..runtime.logs.query import DEFAULT_LIMIT as DEFAULT_LOG_LIMIT
from ..runtime.logs.query import LogPage
from ..runtime.store.core import RunPage
from ..settings import DEFAULT_PROJECT, Settings
from ..suggestions import closest
from ..tracing import Parent
from .contract.services import RunsService
from .partition_pages import run_page
from .views import PARTITION_STATES, attempt_view, event_view, partition_view, run_view
from .watch import SAFETY_RECHECK_S, RunListener

MANUAL_TRIGGER = "manual"       # trigger_id recorded on runs started by `run` (CLI / API)
_EVENT_PAGE = 1000
_MAX_PARTITION_ROWS = 10_000


class InvalidArgument(A44Error):
    """A caller's argument is wrong (unknown state, bad duration...): the CLI maps it to exit 2 (usage)."""

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(E_INVALID_ARGUMENT, message, hint=hint)


def resolve_project(project: str | None, settings: Settings) -> str:
    """`--project`, else `A44_PROJECT` (`settings`, the environment an edge read), else `pj_default`."""
    return project or settings.project or DEFAULT_PROJECT


def workflow_ref(workflow: str) -> str:
    """`wf_invoice_settle` stays; the YAML name `invoice-settle` becomes `wf_invoice_settle` (§3)."""
    workflow = (workflow or "").strip()
    if not workflow:
        raise InvalidArgument("a workflow id is required", hint="e.g. wf_invoice_settle (or its name, invoice-settle)")
    return workflow if workflow.startswith("wf_") else "wf_" + workflow.replace("-", "_")


def require_idempotency_key(key: str | None) -> str:
    """Manual runs are refused without a key (§8.5): the key is what makes a repeated command harmless."""
    if key is None or not str(key).strip():
        raise A44Error(E_IDEMPOTENCY_KEY_REQUIRED,
                       "a manual run needs an idempotency key, so that repeating a test (or a command retried after "
                       "a timeout) does not start a duplicate run",
                       hint="pass --idempotency-key K, derived from the data (e.g. manual-inv_8812-2026-07-19); "
                            "the same K within 24 h returns the original run")
    return str(key)



async def render_partition_key(ir: dict, input: Any) -> str | None:
    """The run's partition key from the workflow's `concurrency.partitionKey` (a template over `input`), so
    per-partition ordering (§10.2) applies to manual runs too. E_TEMPLATE when the input lacks what it reads:
    the run is refused before anything is created."""
    from ..runtime.ingestion.runs import workflow_partition_key

    try:
        return await workflow_partition_key(ir, input, {"id": MANUAL_TRIGGER, "type": "manual"})
    except A44Error as exc:
        raise A44Error(exc.code, exc.message, hint="pass an --input with the fields the partition key reads") \
            from None


@dataclass(frozen=True)
class RunHandle:
    """What `run` returns at once: the run id, whether it was created or deduplicated (and the key's age), and
    with `wait`, the run as it ended (`run`), or as it stood when the timeout passed (`timed_out`)."""
    run_id: str
    created: bool
    key_age_seconds: float
    workflow_id: str
    version: int
    run: dict | None = None
    timed_out: bool = False

    @property
    def state(self) -> str | None:
        return self.run["state"] if self.run else None

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "created": self.created, "key_age_seconds": round(self.key_age_seconds, 3),
                "workflow_id": self.workflow_id, "version": self.version, "timed_out": self.timed_out,
                "run": self.run}


class Automation(RunsService):
    def __init__(self, store, project: str | None = None, *, owns_store: bool = False,
                 archive_dir: Path | None = None):
        self.store = store
        self.project = project or DEFAULT_PROJECT
        self.archive_dir = archive_dir   # the Parquet log archive (paths.log_archive_root); None: the default one
        self._owns_store = owns_store
        self._listener = RunListener(store)

    # --- lifecycle ---------------------------------------------------------------------------------------
    @classmethod
    async def connect(cls, database_url: str | None = None, project: str | None = None, *, clock=None,
                      migrate: bool = False, pool_size: int = 4, settings: Settings | None = None) -> Automation:
        """Connect to `database_url`, else A44_DATABASE_URL, else the embedded server (started if needed).
        `migrate` applies pending migrations first (publish does). The embedded database is always migrated: it
        is this installation's own, so a fresh $A44_HOME answers every verb (`runs`: none yet), not E_DB_SCHEMA.
        `settings`: the environment's values; None reads them here, the Python API being an edge for embedders."""
        from ..paths import log_archive_root, storage_root
        from ..runtime.postgres.database import resolve_url
        from ..runtime.store.core import Store

        env = settings if settings is not None else Settings.from_env()
        url = database_url or await asyncio.to_thread(resolve_url, env, start=True)
        store = await Store.connect(url, clock=clock, min_size=1, max_size=max(2, pool_size),
                                    results_dir=storage_root(env.home), session_url=env.database_session_url)
        try:
            if migrate or (database_url is None and not env.database_url):
                await store.migrate()
        except BaseException:
            await store.close()
            raise
        return cls(store, resolve_project(project, env), owns_store=True,
                   archive_dir=log_archive_root(env.home, env.log_archive_dir))

    async def close(self) -> None:
        await self._listener.close()
        if self._owns_store:
            await self.store.close()

    async def __aenter__(self) -> Automation:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- publish (§3.8) ----------------------------------------------------------------------------------
    async def publish(self, paths: list[str]):
        """Compile and store; see `publishing.publish`. Returns a PublishReport."""
        from .publishing import publish

        return await publish(self.store, self.project, list(paths))

    # --- deploys (§23, docs/deploys.md) --------------------------------------------------------------------
    async def publish_plan(self, paths: list[str]):
        """`publish --plan`: classify the open runs of older versions against the files; nothing is stored."""
        from .deploy_plan import plan_publish

        return await plan_publish(self.store, self.project, list(paths))

    async def migrate_runs(self, workflow: str, to: int, *, from_versions: list[int] | None = None,
                           filter: str | None = None, rate: str | None = None, dry_run: bool = False,
                           allow_reexecute: bool = False, by: str, why: str | None = None) -> dict:
        """`runs migrate`: move open runs of older versions to version `to`, each under its lock, audited."""
        from .run_migration import migrate_runs

        report = await migrate_runs(self.store, self.project, workflow_ref(workflow), to,
                                    from_versions=from_versions, filter=filter, rate=rate, dry_run=dry_run,
                                    allow_reexecute=allow_reexecute, by=by, why=why)
        return report.to_dict()

    async def versions(self, workflow: str) -> dict:
        """Each version of a workflow with its open runs, oldest open run, drained since."""
        from .run_migration import versions

        wid = workflow_ref(workflow)
        return {"workflow_id": wid, "versions": await versions(self.store, self.project, wid)}

    async def retire_version(self, workflow: str, version: int, *, migrate_to: int | None = None, by: str,
                             why: str | None = None) -> dict:
        """`versions retire`: refused while the version has open runs (E_VERSION_HAS_OPEN_RUNS) unless
        `migrate_to` moves them first."""
        from .run_migration import retire

        return await retire(self.store, self.project, workflow_ref(workflow), version, migrate_to=migrate_to,
                            by=by, why=why)

    # --- run (§8.2, §8.5) --------------------------------------------------------------------------------
    async def run(self, workflow: str, input: Any = None, idempotency_key: str | None = None, *,
                  wait: bool = False, timeout: float | str | timedelta | None = None,
                  parent: Parent | None = None, initiator: str | None = None) -> RunHandle:
        """Start a run of the latest published version and return at once; the same key within 24 h returns the
        original run and creates nothing. With `wait`, return when the run reaches a terminal state (or when
        `timeout` passes: `timed_out=True`). `parent` (a W3C trace context) is the parent of the run's trace.
        `initiator`: the name behind the call (an API token's, `local:<os user>`), for approvals' E_SELF_APPROVAL."""
        require_idempotency_key(idempotency_key)
        wid = workflow_ref(workflow)
        input = {} if input is None else input
        latest = await self.store.latest_version(self.project, wid)
        if parent is not None:
            from ..runtime.ingestion.trace_parent import record_parent

            await record_parent(self.store, self.project, [str(idempotency_key)], parent, self.store.clock.now())
        created = await self.store.create_run(
            self.project, wid, input, str(idempotency_key), trigger_id=MANUAL_TRIGGER,
            partition_key=await render_partition_key(latest["ir"], input), queue=latest["ir"].get("queue"),
            version=latest["version"], initiator=initiator)
        version = created.version
        if not created.created:  # report the original run's own workflow/version, not the one asked for
            original = await self.store.get_run(created.run_id)
            wid, version = original["workflow_id"], original["version"]
        handle = RunHandle(created.run_id, created.created, created.key_age_seconds, wid, version)
        if not wait:
            return handle
        run, timed_out = await self.wait(created.run_id, timeout)
        return RunHandle(handle.run_id, handle.created, handle.key_age_seconds, wid, version, run, timed_out)

    async def wait(self, run_id: str, timeout: float | str | timedelta | None = None) -> tuple[dict, bool]:
        """Block until the run is terminal: (run, False); or until `timeout` passes: (run as it stands, True).
        Sleeps on LISTEN a44_run_events; re-checks every few seconds in case a notification is lost."""
        from ..runtime.store.core import TERMINAL_RUN_STATES

        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + parse_duration(timeout).total_seconds()
        async with self._listener.watch(run_id) as woke:
            while True:
                state = await self._state(run_id)
                if state in TERMINAL_RUN_STATES:
                    return await self.get_run(run_id), False
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    return await self.get_run(run_id), True
                await woke.wait(SAFETY_RECHECK_S if left is None else min(SAFETY_RECHECK_S, left))

    async def _state(self, run_id: str) -> str:
        state = await self.store.fetchval("run_state", run_id=run_id, project=self.project)
        if state is None:
            await self.store.get_run(run_id, self.project)  # raises E_RUN_NOT_FOUND with its hint
        return state

    async def get_run(self, run_id: str) -> dict:
        """The run (with input, result and summary); E_RUN_NOT_FOUND when it is not in this project."""
        row = await self.store.get_run(run_id, self.project)
        doc = run_view(row, self.store.clock.now(), detail=True)
        # what it waits on (docs/waits.md): every wait step of the run, the open one with its timeout instant
        doc["waits"] = [dict(w) for w in await self.store.fetch("run_waits_of_run", run_id=run_id)]
        if any(w["kind"] == "approval" for w in doc["waits"]):   # who may decide, what they decided (approvals.md)
            from .approvals import requests_of_run

            doc["approvals"] = await requests_of_run(self.store, run_id)
        if any(w["kind"] == "event" for w in doc["waits"]):     # an event wait: its correlation value, counts
            extra = {(e["epoch"], e["step_id"]): e for e in await self.store.fetch("event_waits_of_run",
                                                                                    run_id=run_id)}
            for w in doc["waits"]:
                e = extra.get((w["epoch"], w["step_id"]))
                if e is not None:
                    w.update(correlation=e["value"], before_since=e["before_since"], if_errors=e["cel_errors"])
        # the debounced / batched events it carries (docs/flow.md "Debounce and batch"), when a flush started it
        from ..runtime.buffers.views import carried

        doc["carried"] = await carried(self.store, run_id)
        return doc

    # --- runs (§6.2, §13) --------------------------------------------------------------------------------
    async def daemon_presence(self):
        """Whether a daemon serves this database now (runtime/engine/heartbeat.py): `Presence.warning()` is the
        line a user whose runs would wait in `pending` needs."""
        from ..runtime.engine.heartbeat import presence

        return await presence(self.store)

    async def runs(self, state: str | None = None, workflow: str | None = None, step: str | None = None,
                   since: str | float | timedelta | datetime | None = None, limit: int = 50,
                   offset: int = 0) -> RunPage:
        """Runs newest first and the total that match. `since` is an age (`48h`, seconds, timedelta) or an
        instant; `step` matches runs whose current or failed step is it, or that attempted it."""
        from ..runtime.store.core import RUN_STATES

        if state is not None and state not in RUN_STATES:
            known = f"known states: {', '.join(RUN_STATES)}"
            close = closest(state, RUN_STATES, 0.5)
            raise InvalidArgument(f"unknown run state {state!r}",
                                  hint=f"did you mean {close!r}? {known}" if close else known)
        if limit < 0 or offset < 0:
            raise InvalidArgument("limit and offset must not be negative")
        if since is not None and not isinstance(since, datetime):
            try:
                since = parse_duration(since)
            except ValueError as exc:
                raise InvalidArgument(str(exc)) from None
        page = await self.store.list_runs(self.project, state=state,
                                          workflow=workflow_ref(workflow) if workflow else None,
                                          step=step, since=since, limit=limit, offset=offset)
        now = self.store.clock.now()
        docs = [run_view(r, now) for r in page.runs]
        waiting = [d["run_id"] for d in docs if d["state"] == "waiting"]
        if waiting:     # what each waits on, when a wait step holds it (docs/waits.md)
            opened = await self.store.fetch("run_waits_open_of_runs", run_ids=waiting)
            values = {(e["run_id"], e["step_id"]): e["value"]     # an event wait: its correlation value
                      for e in await self.store.fetch("event_waits_open_of_runs", run_ids=waiting)}
            on = {w["run_id"]: f"{w['kind']} {w['key']}" + (f" = {values[(w['run_id'], w['step_id'])]}"
                                                             if (w["run_id"], w["step_id"]) in values else "")
                  for w in opened}
            if any(w["kind"] == "approval" for w in opened):     # and who may decide (docs/approvals.md)
                from .approvals import waiting_on

                on.update(await waiting_on(self.store, [w["run_id"] for w in opened if w["kind"] == "approval"]))
            for d in docs:
                if d["run_id"] in on:
                    d["waiting_on"] = on[d["run_id"]]
        return RunPage(page.total, docs)

    # --- logs (§7.4, §8.5) -------------------------------------------------------------------------------
    async def logs(self, run_id: str) -> list[dict]:
        """Every attempt of the run in the order they started (actions and compensations, all epochs)."""
        await self.store.get_run(run_id, self.project)  # E_RUN_NOT_FOUND rather than an empty list
        return [attempt_view(a) for a in await self.store.list_attempts(run_id)]

    async def follow(self, run_id: str, after_id: int = 0) -> AsyncIterator[dict]:
        """The run's events (run.created, attempt.started, attempt.finished, run.state...) from `after_id` on, as
        they are recorded; ends once the run is terminal and every event up to then was yielded."""
        from ..runtime.store.core import TERMINAL_RUN_STATES

        await self.store.get_run(run_id, self.project)
        last = after_id
        async with self._listener.watch(run_id) as woke:
            while True:
                # state first, events second: a terminal state read here means its event is already written
                # (state change and event share one transaction), so draining now yields everything
                state = await self._state(run_id)
                while True:
                    batch = await self.store.list_run_events(run_id, last, _EVENT_PAGE)
                    for row in batch:
                        last = row["id"]
                        yield event_view(row)
                    if len(batch) < _EVENT_PAGE:
                        break
                if state in TERMINAL_RUN_STATES:
                    return
                await woke.wait(SAFETY_RECHECK_S)

    async def changes(self, every_s: float = 2.0) -> AsyncIterator[dict]:
        """`{id, kind: "runs.changed"}` each time some run has news (LISTEN a44_run_events), at most once per
        `every_s`, forever: what a live list of runs re-reads on."""
        from .watch import ANY_RUN

        n = 0
        async with self._listener.watch(ANY_RUN) as woke:
            while True:
                if await woke.wait(None):
                    n += 1
                    yield {"id": n, "kind": "runs.changed"}
                    await asyncio.sleep(every_s)

    # --- partitions (docs/partitions.md) ------------------------------------------------------------------
    async def partitions(self, target: str, *, state: str | None = None, partition: str | None = None,
                         step: str | None = None, limit: int = 1000, cursor: str | None = None) -> dict:
        """Partitions of run `target` (`run_...`, in order, a page after `cursor`: partition_pages.py) or of
        workflow `target`'s runs (newest run first): state, attempts, rows, when, which run, who skipped it.
        Returns {target, partitions, counts} (counts: of the rows returned), and for a run {next, total,
        failed}."""
        if state is not None and state not in PARTITION_STATES:
            raise InvalidArgument(f"unknown partition state {state!r}", hint=f"one of: {', '.join(PARTITION_STATES)}")
        if not 0 < limit <= _MAX_PARTITION_ROWS:
            raise InvalidArgument(f"limit must be between 1 and {_MAX_PARTITION_ROWS}")
        run_id = target if target.startswith("run_") else None
        if run_id is not None:
            await self.store.get_run(run_id, self.project)      # E_RUN_NOT_FOUND rather than an empty list
        page: dict[str, Any] = {}
        if run_id is not None:
            page = await run_page(self.store, self.project, run_id, state=state, partition=partition, step=step,
                                  limit=limit, cursor=cursor)
            docs = page.pop("partitions")
        else:
            if cursor is not None:
                raise InvalidArgument("a cursor pages the partitions of a run (run_...), not of a workflow")
            rows = await self.store.fetch("partition_list", project=self.project, run_id=None,
                                          workflow=workflow_ref(target), state=state, partition=partition,
                                          step=step, limit=limit)
            docs = [partition_view(dict(r)) for r in rows]
        counts: dict[str, int] = {}
        for d in docs:
            counts[d["state"]] = counts.get(d["state"], 0) + 1
        return {"target": target, "partitions": docs, "counts": counts, **page}

    async def skip(self, run_id: str, *, reason: str, by: str, partition: str | None = None,
                   step: str | None = None) -> dict:
        """A person skips a permanently failed partition (or step) of a partial or failed run, saying why; a
        partial run with nothing failed left becomes succeeded (runtime.engine.skips)."""
        from ..runtime.engine.skips import skip

        return await skip(self.store, self.project, run_id, reason=reason, by=by, partition=partition, step=step)

    async def cancel(self, run_id: str, *, by: str, reason: str | None = None, compensate: bool = False) -> dict:
        """A person cancels a run, saying who and why: at once when no worker holds it, else at the holder's next
        safe point (`outcome` requested); `compensate` undoes its completed steps first (runtime.engine.cancels).
        A cancelled run answers `already_cancelled`; a finished one raises E_CANCEL_NOT_ALLOWED."""
        from ..runtime.engine.cancels import cancel

        return await cancel(self.store, self.project, run_id, by=by, reason=reason, compensate=compensate)

    async def signal(self, run_id: str, name: str, data: Any = None, *, key: str | None = None,
                     by: str | None = None) -> dict:
        """Send signal `name` to a run: consumed by its open wait of that name, or buffered for the next one
        (runtime.engine.signals); a repeated `key` answers the first signal."""
        from ..runtime.engine.signals import send

        return await send(self.store, self.project, run_id, name, data, key=key, by=by)

    async def run_tree(self, run_id: str) -> dict:
        """The tree of child workflows `run_id` belongs to, from its root (app/lineage.py)."""
        from .lineage import run_tree

        return await run_tree(self, run_id)

    async def export(self, workflow: str, *, since: timedelta, sample: int) -> list[dict]:
        """`runs export`: up to `sample` finished runs of `workflow` (id or name) created within `since`, as
        histories redacted like results (app/exports.py)."""
        from .exports import export_runs

        return [h async for h in export_runs(self.store, self.project, workflow_ref(workflow), since=since,
                                             sample=sample)]

    async def wake(self, run_id: str, step: str, *, by: str, reason: str) -> dict:
        """A person ends sleep `step` now, saying who and why (runtime.engine.timers): refused with
        E_TIMER_NOT_SLEEPING when the step is not an open sleep or its instant has come."""
        from ..runtime.engine.timers import wake

        return await wake(self.store, self.project, run_id, step, by=by, reason=reason)

    async def explain(self, run_id: str) -> dict:
        """What holds the run back (§22, docs/flow.md "Why queued"): its limits and their use now, and the paused
        flow key it waits on, if any."""
        from ..runtime import flow_pauses
        from ..runtime.flow_explain import explain

        doc = await explain(self.store, self.project, run_id)
        run = await self.store.get_run(run_id, self.project)
        on = flow_pauses.paused_on(run, await self.store.list_attempts(run_id))
        if on is not None:
            rows = {r["key"]: r for r in await flow_pauses.list_paused(self.store, self.project)}
            key = next((k for k in rows if f"flow key {k} " in on), None)
            row = rows.get(key) if key else None
            doc["pause"] = {"key": key, "waiting_on": on, "until": row["paused_until"] if row else None,
                            "reason": row.get("reason") if row else None, "source": row.get("source") if row else None}
            doc["held_back"] = True
        return doc

    async def reschedule(self, run_id: str, step: str, *, until: str, by: str, reason: str | None = None) -> dict:
        """A person moves the due instant of sleep `step` to `until` (ISO 8601 with its offset); past the run's
        deadline refuses with E_SLEEP_EXCEEDS_RUN_DEADLINE (runtime.engine.timers)."""
        from ..runtime.engine.timers import reschedule

        return await reschedule(self.store, self.project, run_id, step, until=until, by=by, reason=reason)

    async def approve(self, run_id: str, step: str, decision: str, *, person: str, via: str = "cli",
                      comment: str | None = None) -> dict:
        """`person` decides on the approval of `step` (app/approvals.py, docs/approvals.md)."""
        from .approvals import approve

        return await approve(self.store, self.project, run_id, step, decision, person=person, via=via,
                             comment=comment)

    async def approvals(self, *, person: str | None = None, overdue: bool = False, limit: int = 100) -> list[dict]:
        """The open approvals (only those `person` may decide and has not; only the overdue ones)."""
        from .approvals import approvals

        return await approvals(self.store, self.project, person=person, overdue=overdue, limit=limit)

    async def query_logs(self, *, error_code: str | None = None, step: str | None = None,
                         workflow: str | None = None, partition_key: str | None = None, since=None, until=None,
                         limit: int = DEFAULT_LOG_LIMIT, after: str | None = None, archive: bool = False) -> LogPage:
        """Attempts of every run of the project, newest first, filtered (docs/observability.md "Log queries"):
        at most `limit` (<= 10,000) rows; `page.next` continues a truncated answer. `since`/`until` are ages
        (`7d`) or instants; `archive` reads the Parquet days of the cold store instead of PostgreSQL."""
        from ..paths import log_archive_root
        from .logs import log_filter, query_logs

        f = log_filter(self.project, self.store.clock.now(), since=since, until=until, error_code=error_code,
                       step=step, workflow=workflow_ref(workflow) if workflow else None, partition_key=partition_key)
        where = (self.archive_dir or log_archive_root(None)) if archive else None
        return await query_logs(self.store, f, limit=limit, after=after, archive_dir=where)

    # --- exclusive steps (§7.3) --------------------------------------------------------------------------
    async def resolve(self, run_id: str, step_id: str, outcome: str, *, by: str | None = None) -> dict:
        """A person's answer for an `exclusive` step whose lease expired: succeeded | failed | retry. The
        interpreter owns the transition (`runtime.engine.resolve_confirmation`, which refuses a run not parked on
        that step); `by` is recorded with the decision. Returns the run as it stands afterwards."""
        from ..runtime.engine import OUTCOMES, resolve_confirmation

        if outcome not in OUTCOMES:
            raise InvalidArgument(f"unknown outcome {outcome!r}", hint=f"one of: {', '.join(OUTCOMES)}")
        await self.store.get_run(run_id, self.project)  # E_RUN_NOT_FOUND outside this project
        await resolve_confirmation(self.store, run_id, step_id, outcome, by=by)
        return await self.get_run(run_id)
