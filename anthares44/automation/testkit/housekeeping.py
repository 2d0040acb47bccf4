"""`Housekeeping`: the daemon's other loops (app/serve.py), driven by the test kit at the virtual instants they are
due: the alert evaluator's round (runtime/alerts/evaluator.py), the delivery of the notification outbox
(runtime/notify/delivery.py) and the log retention round (runtime/logs/retention.py). The kit calls what those
loops call (`Evaluator.step`, `Deliverer.deliver_due`, `run_retention`) instead of running the loops, so no alarm
of theirs sits on the VirtualClock and `next_alarm()` never steps through them.

Their instants, as serve's loops have them:
- the evaluator: a round when the daemon starts, then one `interval_s` after the previous round began. Its rounds
  sample the metrics a rule's window needs, so while it is *active* it is due every interval: active when the
  store holds a user alert rule and something changed (engine work, a delivery, an alert's state) within the
  longest window plus four intervals (what the sampler keeps), or an alert fires whose suppression window has not
  ended. Quiet, it is not due by itself (a rule on an unchanging store would spin `run_until_idle` forever), but
  before the kit jumps to work due at T it runs the grid rounds of the last `keep` before T, so the windows at T
  are covered as a daemon sampling all along would have them (the values in between did not change).
- delivery: `notify_next_due`, the query the delivery worker sleeps on.
- retention: the hourly grid (first round 60 s after start); due at the first grid instant at which a round has
  something to do (a day of attempts past the hot retention, a month partition past it, an archived day past
  the cold retention). Retention is never a reason to keep `run_until_idle` going: it is a stop on the way to
  other work or to `advance`'s target.
"""

from __future__ import annotations

import logging
import math
import random
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from ..runtime.alerts import rules as rule_store
from ..runtime.alerts.evaluator import DEFAULT_INTERVAL_S, Evaluator, _window_s
from ..runtime.logs import archive
from ..runtime.logs.retention import ARCHIVE_MONTHS, HOT_DAYS, month_bounds, run_retention
from ..runtime.notify.delivery import Deliverer, DeliverySettings

log = logging.getLogger("a44.testkit")
RETENTION_EVERY = timedelta(seconds=3600)      # retention_loop's `every`
RETENTION_FIRST = timedelta(seconds=60)        # retention_loop's `first_after`
FAR = datetime(9999, 1, 1, tzinfo=UTC)


def _grid_at_or_after(anchor: datetime, step: timedelta, t: datetime) -> datetime:
    """The first instant anchor + k*step (k >= 0) at or after t."""
    if t <= anchor:
        return anchor
    return anchor + step * math.ceil((t - anchor) / step)


def _add_months(day: date, months: int) -> datetime:
    total = day.year * 12 + day.month - 1 + months
    return datetime(total // 12, total % 12 + 1, 1, tzinfo=UTC)


class Housekeeping:
    def __init__(self, store, clock, *, secrets, rng: random.Random, archive_root: Path,
                 interval_s: float = DEFAULT_INTERVAL_S, delivery: DeliverySettings | None = None,
                 hot_days: int = HOT_DAYS, archive_months: int = ARCHIVE_MONTHS):
        self.store, self.clock = store, clock
        self.interval = timedelta(seconds=interval_s)
        self.evaluator = Evaluator(store, holder="kit", interval_s=interval_s, clock=clock)
        self.deliverer = Deliverer(store, secrets, delivery, rng=rng, clock=clock)
        self.archive_root, self.hot_days, self.archive_months = archive_root, hot_days, archive_months
        start = clock.now()
        self._anchor = start                       # serve: a round at start, then every interval
        self._eval_due = start
        self._retention_anchor = start + RETENTION_FIRST
        self._retention_after = start              # no round before this (the last round's instant)
        self._retention_on = True                  # off for good without pyarrow, as retention_loop ends
        self._last_change = start
        self._fingerprint: tuple = ()
        self.rounds = {"evaluator": 0, "delivery": 0, "retention": 0}

    # --- state ------------------------------------------------------------------------------------------------
    def changed(self) -> None:
        """Something happened at the current instant (the engine's work): the evaluator is active again."""
        self._last_change = self.clock.now()

    async def _rules(self) -> list:
        return [r for r in await self.store.fetch("alert_rules_all") if r["name"] != rule_store.BUILTIN]

    async def _keep(self, rules: list) -> timedelta:
        return timedelta(seconds=max([_window_s(r) for r in rules] + [0.0])) + self.interval * 4

    async def _firing(self) -> list[dict]:
        return [dict(a) for a in await self.store.fetch("alerts_firing_all")]

    async def _eval_active(self, rules: list) -> bool:
        now = self.clock.now()
        if not rules:
            return False
        if now - self._last_change <= await self._keep(rules):
            return True
        for a in await self._firing():     # its suppression window may still end in an escalation
            ends = (a.get("machine") or {}).get("window_ends_at") if isinstance(a.get("machine"), dict) else None
            if ends is None or datetime.fromisoformat(str(ends)) >= now - self.interval:
                return True
        return False

    # --- rounds -----------------------------------------------------------------------------------------------
    async def tick(self) -> bool:
        """Run what is due at the current instant; True when it changed something (settling goes on)."""
        now = self.clock.now()
        changed = False
        rules = await self._rules()
        if rules and now >= self._eval_due:
            await self.evaluator.step()
            self.rounds["evaluator"] += 1
            self._eval_due = _grid_at_or_after(self._anchor, self.interval, now + self.interval)
            mark = tuple((a["alert_id"], str(a["machine"])) for a in await self._firing())
            if mark != self._fingerprint:
                self._fingerprint, changed = mark, True
        while await self.deliverer.deliver_due():
            self.rounds["delivery"] += 1
            changed = True
        due = await self._retention_due()
        if due is not None and due <= now:
            changed = await self._retention() or changed
        if changed:
            self.changed()
        return changed

    async def _retention(self) -> bool:
        from ..errors import E_ARCHIVE_UNAVAILABLE, A44Error

        self._retention_after = self.clock.now()
        try:
            report = await run_retention(self.store, self.archive_root, hot_days=self.hot_days,
                                         archive_months=self.archive_months)
        except A44Error as exc:
            if exc.code != E_ARCHIVE_UNAVAILABLE:
                raise
            log.warning("log retention is off under the kit: %s", exc.message)
            self._retention_on = False
            return False
        self.rounds["retention"] += 1
        return bool(report.archived_days or report.dropped_months or report.deleted_runs
                    or report.deleted_archive_days)

    # --- instants ---------------------------------------------------------------------------------------------
    async def work_due(self) -> datetime | None:
        """The earliest instant of work that keeps `run_until_idle` going: a notification's attempt, the evaluator's
        next round while it is active."""
        got = [await self.store.fetchval("notify_next_due")]
        rules = await self._rules()
        if await self._eval_active(rules):
            got.append(max(self._eval_due, self.clock.now()))
        return min((g for g in got if g is not None), default=None)

    async def stop_before(self, bound: datetime) -> datetime | None:
        """A housekeeping instant before `bound` (the next work, or `advance`'s target) the kit must stop at: a
        retention round that acts, or a grid round of the evaluator within the window before `bound`."""
        got = []
        due = await self._retention_due()
        if due is not None and due <= bound:
            got.append(due)
        rules = await self._rules()
        if rules:
            nxt = max(self._eval_due, _grid_at_or_after(self._anchor, self.interval, bound - await self._keep(rules)))
            if nxt < bound:
                got.append(max(nxt, self.clock.now()))
        return min(got, default=None)

    async def _retention_due(self) -> datetime | None:
        """The first grid instant after the last round at which a retention round has something to do."""
        if not self._retention_on:
            return None
        hot = timedelta(days=self.hot_days)
        acts = []
        days = await self.store.fetch("logs_days_to_archive", cutoff=FAR)
        if days:
            first = min(r["day"] for r in days)
            acts.append(datetime(first.year, first.month, first.day, tzinfo=UTC) + timedelta(days=1) + hot)
        for part in await self.store.list_partitions():
            bounds = month_bounds(part["name"])
            if bounds is not None:
                acts.append(bounds[1] + hot)
        kept = archive.archived_days(self.archive_root)
        if kept:
            acts.append(_add_months(kept[0], self.archive_months + 1))
        if not acts:
            return None
        after = self._retention_after + timedelta(microseconds=1)
        return _grid_at_or_after(self._retention_anchor, RETENTION_EVERY, max(min(acts), after))

    async def close(self) -> None:
        await self.deliverer.close()
