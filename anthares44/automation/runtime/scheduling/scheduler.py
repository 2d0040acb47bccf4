"""The scheduler (§11): turns the occurrences of active schedule triggers into runs, once each.

A tick (`Scheduler.tick`), for each active schedule trigger of the `triggers` table:
1. under a per-trigger transaction advisory lock (so that two schedulers decide about one trigger in turn),
   expires queued occurrences past their `expires_at`, starts the oldest queued one if no run of the trigger is
   unfinished, and computes the firings between the trigger's cursor (its latest recorded occurrence, else its
   first publication) and now from the schedule alone (`occurrences.firings`);
2. decides each due firing (`decide`, pure): on time (no later than `misfire_grace`) or missed; missed ones are
   recovered by `catchUp` (the newest `maxOccurrences` no older than `maxAge`) or recorded `missed`; the others
   go through `overlap`;
3. inserts the decisions under the unique key (project_id, occurrence_key) with ON CONFLICT DO NOTHING: only the
   keys this insert won come back, and only those go on to create a run;
4. after the commit, creates the run of every `started` occurrence without a run, with the store's `create_run`
   and idempotency key = the occurrence key, then records the run id on the occurrence.

Step 4 is idempotent: a scheduler that dies between the commit and the run leaves a `started` row without
`run_id`; any scheduler's next tick creates the run (after `repair_after`, so the winner normally does it
itself), and the idempotency key makes a second `create_run` return the same run instead of a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ...clock import Clock
from ...errors import E_WORKFLOW_NOT_FOUND, A44Error
from ..ticking import tick_loop
from .occurrences import Firing, ScheduleError, firings, firings_after

log = logging.getLogger("a44.scheduler")

DEFAULT_MISFIRE_GRACE = timedelta(seconds=60)   # later than this after its instant, an occurrence was missed
DEFAULT_MAX_WAIT = timedelta(hours=24)          # queue / catch-up age limit without catchUp.maxAge (§8.2 window)
DEFAULT_LOOKBACK = timedelta(days=7)            # occurrences older than this are not even recorded as missed
DEFAULT_POLL = timedelta(seconds=5)             # longest sleep of the loop in wall time (trigger changes, runs ending)
DEFAULT_REPAIR_AFTER = timedelta(seconds=30)    # a started occurrence without a run this old is repaired by anyone


@dataclass(frozen=True)
class Decision:
    firing: Firing
    status: str                     # started | skipped_overlap | queued | missed
    catch_up: bool = False
    expires_at: datetime | None = None


@dataclass
class TickReport:
    """What one tick did (tests and -v logs read it)."""
    decided: dict[str, str] = field(default_factory=dict)      # occurrence_key -> status, for keys this tick won
    lost: list[str] = field(default_factory=list)              # keys another scheduler recorded first
    started_from_queue: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    runs_created: dict[str, str] = field(default_factory=dict)  # occurrence_key -> run_id created by this tick
    runs_linked: dict[str, str] = field(default_factory=dict)   # occurrence_key -> run_id that already existed
    errors: list[str] = field(default_factory=list)

    def merge(self, other: TickReport) -> None:
        self.decided.update(other.decided)
        self.lost.extend(other.lost)
        self.started_from_queue.extend(other.started_from_queue)
        self.expired.extend(other.expired)
        self.runs_created.update(other.runs_created)
        self.runs_linked.update(other.runs_linked)
        self.errors.extend(other.errors)


def max_wait(trigger) -> timedelta:
    """How old an occurrence may be and still start: catchUp.maxAge, else 24 h."""
    cu = trigger.catch_up
    if cu is not None and cu.max_age_ms is not None:
        return timedelta(milliseconds=cu.max_age_ms)
    return DEFAULT_MAX_WAIT


def decide(due: Iterable[Firing], now: datetime, trigger, *, busy: bool,
           misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE) -> list[Decision]:
    """Decide the due firings of one trigger (pure). `busy`: a run of the trigger is unfinished (or queued
    occurrences wait). Returns decisions in firing order."""
    due = sorted(due, key=lambda f: f.instant)
    limit = max_wait(trigger)
    late = [f for f in due if now - f.instant > misfire_grace]
    on_time = [f for f in due if now - f.instant <= misfire_grace]
    recover: list[Firing] = []
    cu = trigger.catch_up
    if cu is not None and cu.enabled and cu.max_occurrences > 0:
        eligible = [f for f in late if now - f.instant <= limit]
        recover = eligible[-cu.max_occurrences:]          # the newest ones: the least stale
    recovered = {f.instant for f in recover}
    out = [Decision(f, "missed") for f in late if f.instant not in recovered]
    overlap = trigger.overlap or "skip"
    for f in sorted(recover + on_time, key=lambda f: f.instant):
        is_cu = f.instant in recovered
        if overlap == "allow" or not busy:
            out.append(Decision(f, "started", is_cu))
            busy = True
        elif is_cu or overlap == "queue":
            out.append(Decision(f, "queued", is_cu, f.instant + limit))
        else:
            out.append(Decision(f, "skipped_overlap", is_cu))
    return sorted(out, key=lambda d: d.firing.instant)


def _trigger_ir(doc):
    from ...compiler.ir import TriggerIR

    return TriggerIR.model_validate(doc)


class Scheduler:
    """Starts the runs of schedule triggers. `tick()` does one pass at the clock's instant; `serve(stop)` loops
    (sleeping until its clock reaches the next firing or a queued expiry, or `poll` of wall time passes) until
    `stop` is set."""

    def __init__(self, store, *, clock: Clock | None = None, name: str = "scheduler",
                 misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE, lookback: timedelta = DEFAULT_LOOKBACK,
                 poll: timedelta | None = None, repair_after: timedelta = DEFAULT_REPAIR_AFTER):
        self.store = store
        self.clock = clock or store.clock
        self.name = name
        self.misfire_grace = misfire_grace
        self.lookback = lookback
        self.poll = poll or DEFAULT_POLL
        self.repair_after = repair_after
        self._triggers: list[tuple[dict, object]] = []

    # --- one pass -------------------------------------------------------------------------------------------
    async def tick(self) -> TickReport:
        now = self.clock.now()
        report = TickReport()
        triggers = []
        for row in await self.store.fetch("schedule_triggers_active"):
            try:
                trig = _trigger_ir(row["ir"])
                if not trig.cron or not trig.tz:
                    raise ScheduleError("a schedule trigger needs cron and tz")
            except (ValueError, ScheduleError) as exc:
                report.errors.append(f"{row['trigger_id']}: {exc}")
                log.warning("schedule trigger %s/%s is unusable: %s", row["project_id"], row["trigger_id"], exc)
                continue
            triggers.append((dict(row), trig))
        self._triggers = triggers
        mine: list[tuple[str, str]] = []
        for row, trig in triggers:
            try:
                mine.extend(await self._decide_trigger(row, trig, now, report))
            except ScheduleError as exc:
                report.errors.append(f"{row['trigger_id']}: {exc}")
                log.warning("schedule trigger %s/%s: %s", row["project_id"], row["trigger_id"], exc)
        await self._create_runs(now, set(mine), report)
        return report

    async def _decide_trigger(self, row: dict, trig, now: datetime, report: TickReport) -> list[tuple[str, str]]:
        project, tid = row["project_id"], row["trigger_id"]
        won: list[tuple[str, str]] = []
        async with self.store.transaction("schedule_tick") as conn:
            await conn.execute("schedule_trigger_lock", project=project, trigger_id=tid)
            for r in await conn.fetch("schedule_queued_expire", project=project, trigger_id=tid, now=now):
                report.expired.append(r["occurrence_key"])
            busy = await conn.fetchval("schedule_trigger_busy", project=project, trigger_id=tid)
            if not busy:
                r = await conn.fetchrow("schedule_queued_start_next", project=project, trigger_id=tid, now=now)
                if r is not None:
                    report.started_from_queue.append(r["occurrence_key"])
                    won.append((project, r["occurrence_key"]))
                    busy = True
            cursor = await conn.fetchval("schedule_cursor", project=project, trigger_id=tid)
            # occurrences strictly after the latest decided one, else strictly after the first publication
            lo = (row["published_at"] if cursor is None else cursor) + timedelta(microseconds=1)
            lo = max(lo, now - max(self.lookback, max_wait(trig)))
            due = firings(trig.cron, trig.tz, trig.dst_policy or "skip-nonexistent", lo,
                          now + timedelta(microseconds=1))
            if not due:
                return won
            decisions = decide(due, now, trig, busy=busy, misfire_grace=self.misfire_grace)
            keys = [d.firing.key(tid) for d in decisions]
            rows = await conn.fetch("schedule_occurrences_insert", project=project, trigger_id=tid, keys=keys,
                                    instants=[d.firing.instant for d in decisions],
                                    statuses=[d.status for d in decisions], catch_ups=[d.catch_up for d in decisions],
                                    expires=[d.expires_at for d in decisions], now=now)
        got = {r["occurrence_key"]: r["status"] for r in rows}
        for k in keys:
            if k in got:
                report.decided[k] = got[k]
                if got[k] == "started":
                    won.append((project, k))
            else:
                report.lost.append(k)
        return won

    async def _create_runs(self, now: datetime, mine: set[tuple[str, str]], report: TickReport) -> None:
        """Create the run of each started occurrence without one: those this tick won, and any left behind by
        a scheduler that died (older than repair_after)."""
        rows = await self.store.fetch("schedule_runs_to_create", now=now)
        for r in rows:
            key = r["occurrence_key"]
            if (r["project_id"], key) not in mine and now - r["created_at"] < self.repair_after:
                continue        # another scheduler won it a moment ago and is creating the run
            trig = _trigger_ir(r["ir"])
            try:
                created = await self.store.create_run(r["project_id"], r["workflow_id"], trig.input or {}, key,
                                                      trigger_id=r["trigger_id"])
            except A44Error as exc:
                if exc.code == E_WORKFLOW_NOT_FOUND:
                    await self.store.execute("schedule_occurrence_fail", project_id=r["project_id"], key=key,
                                             code=exc.code, now=now)
                    log.warning("occurrence %s: %s", key, exc.message)
                    report.errors.append(f"{key}: {exc.code}")
                    continue
                raise
            await self.store.execute("schedule_occurrence_set_run", project_id=r["project_id"], key=key,
                                     run_id=created.run_id, now=now)
            (report.runs_created if created.created else report.runs_linked)[key] = created.run_id
            log.info("occurrence %s -> %s (%s)", key, created.run_id, "created" if created.created else "existing")

    # --- the loop -------------------------------------------------------------------------------------------
    async def next_wake(self, after: datetime | None = None) -> datetime | None:
        """The instant of the clock at which the loop ticks next: the earliest firing after `after` (the instant
        the last tick began; default now) or queued expiry (None: neither; the loop then ticks after `poll`). From
        the tick's instant, not the clock's now: a firing the clock passed while the tick ran wakes the loop at once
        instead of waiting a whole period to be decided late."""
        now = after or self.clock.now()
        wakes = []
        for _, trig in self._triggers:
            with contextlib.suppress(ScheduleError):
                nxt = firings_after(trig.cron, trig.tz, trig.dst_policy or "skip-nonexistent", now)
                if nxt:
                    wakes.append(nxt[0].instant)
        expiry = await self.store.fetchval("schedule_next_expiry")
        if expiry is not None:
            wakes.append(max(expiry, now))
        return min(wakes, default=None)

    async def serve(self, stop: asyncio.Event) -> None:
        async def tick() -> datetime | None:
            ticked_at = self.clock.now()
            await self.tick()
            return await self.next_wake(ticked_at)
        await tick_loop(self.store, self.clock, stop, tick, self.poll.total_seconds(), "scheduler", log)


async def list_occurrences(store, project: str, trigger_id: str | None = None, limit: int = 1000) -> list[dict]:
    return [dict(r) for r in await store.fetch("schedule_occurrences_list", project=project, trigger_id=trigger_id,
                                               limit=limit)]
