"""The alert evaluator: one daemon at a time (the holder of the `alert_evaluator` row's lease) samples the system
metrics every interval, evaluates every rule of every project on the stored samples, raises the built-in alerts,
and lets time pass on the firing ones (escalation when a window ends). Another daemon takes over when the
holder's lease expires (three intervals), so a dead daemon never stops alerting.

`evaluate_rule` is also `a44 monitor alert test`: the verdict per series now, sending nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from ...clock import Clock, wait_event
from ...errors import A44Error
from ...grammar.alert_rules import METRICS, evaluate, parse_condition, parse_filter
from . import approvals_overdue, builtins, ledger, sampler
from . import rules as rule_store
from .causes import CAUSED_STATES, dead_letter_causes, dead_letter_context, runs_context
from .suppression import Policy, State, tick

log = logging.getLogger("a44.alerts")
DEFAULT_INTERVAL_S = 15.0
LEASE_INTERVALS = 3


async def evaluate_rule(store, project: str, row, now: datetime, interval_s: float) -> list[dict]:
    """Each series of the rule's metric that its filter matches: labels, verdict (True/False/None), value, and
    the number of samples it was judged on."""
    cond, matchers = parse_condition(row["condition"]), parse_filter(row["filter"], METRICS[row["metric"]])
    tolerance = interval_s * 0.5     # sampling jitter: a round starts a little late or early
    since = now - timedelta(seconds=(cond.window_s or interval_s * 2) + tolerance)
    series: dict[str, tuple[dict, list]] = {}
    for s in await store.fetch("alert_samples_series", project=project, metric=row["metric"], since=since, now=now):
        series.setdefault(sampler.labels_key(s["labels"]), (s["labels"], []))[1].append((s["at"], s["value"]))
    # a counter series born inside the window counts from 0 if the project was sampled before it (evaluate)
    sampled_since = (await store.fetchval("alert_samples_first", project=project, since=since, now=now)
                     if cond.function in ("rate", "increase") else None)
    out = []
    for key in sorted(series):
        labels, samples = series[key]
        if all(m.matches(labels) for m in matchers):
            v = evaluate(cond, samples, now, tolerance, sampled_since)
            out.append({"labels": labels, "group_key": key, "firing": v.firing, "value": v.value,
                        "samples": v.samples, "reason": v.reason})
    return out


class Evaluator:
    def __init__(self, store, *, holder: str, interval_s: float = DEFAULT_INTERVAL_S, clock: Clock | None = None):
        self.store, self.holder, self.interval_s = store, holder, interval_s
        self.clock = clock or store.clock
        self._failing = False

    async def serve(self, stop: asyncio.Event) -> None:
        """Evaluate every interval of the clock until `stop` (alert windows and the evaluator's lease are instants
        of that clock, so a VirtualClock moved by 5 min evaluates a 5 min window); a failed round (database down)
        logs once per state change and is retried after an interval of wall time (the database's return is an event
        of the outside world)."""
        try:
            while not stop.is_set():
                next_round: datetime | None = self.clock.now() + timedelta(seconds=self.interval_s)
                try:
                    await self.step()
                    if self._failing:
                        log.info("alert evaluation recovered")
                    self._failing = False
                except Exception as exc:  # noqa: BLE001 - a failed round must not end alerting: the next one retries
                    if not self._failing:
                        what = f"{exc.code} {exc.message}" if isinstance(exc, A44Error) else repr(exc)
                        log.warning("alert evaluation failed: %s (retrying every %ss)", what, self.interval_s)
                    self._failing = True
                    next_round = None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if next_round is not None else self.interval_s):
                        await wait_event(self.clock, stop, next_round)
        finally:
            with contextlib.suppress(Exception):
                await self.store.execute("alert_evaluator_release", holder=self.holder, now=self.clock.now())

    async def step(self) -> bool:
        """One round; False when another daemon holds the evaluator's lease."""
        now = self.clock.now()
        horizon = await self.store.fetchval(
            "alert_evaluator_claim", holder=self.holder, now=now,
            until=now + timedelta(seconds=self.interval_s * LEASE_INTERVALS))
        if horizon is None:
            return False
        rows = await self.store.fetch("alert_rules_all")
        builtin = {r["project_id"]: rule_store.policy(r) for r in rows if r["name"] == rule_store.BUILTIN}
        policy_for = builtins.policy_of(builtin, rule_store.DEFAULT_BUILTIN)
        user_rules = {(r["project_id"], r["name"]): r for r in rows if r["name"] != rule_store.BUILTIN}

        before = await sampler.previous_dlq(self.store, now, self.interval_s)
        series = await sampler.read_series(self.store, now, before)
        keep = max([_window_s(r) for r in user_rules.values()] + [0.0])
        await sampler.record(self.store, series, now, timedelta(seconds=keep + self.interval_s * 4))

        firing = [dict(a) for a in await self.store.fetch("alerts_firing_all")]
        await builtins.run_outcomes(self.store, now, horizon, self.holder, policy_for, firing)
        await builtins.dlq_growth(self.store, now, before, series, policy_for, firing)
        await approvals_overdue.check(self.store, now, series, policy_for, firing)
        for (project, name), row in user_rules.items():
            try:
                await self._rule(project, row, now,
                                 [a for a in firing if a["project_id"] == project and a["rule"] == name])
            except A44Error as exc:     # one broken rule (edited in the database) must not stop the others
                log.warning("alert rule %s of %s cannot be evaluated: %s %s", name, project, exc.code, exc.message)
        await self._tick(now, user_rules, policy_for)
        return True

    async def _rule(self, project: str, row, now: datetime, firing: list[dict]) -> None:
        policy = rule_store.policy(row)
        by_group = {a["group_key"]: a for a in firing}
        for s in await evaluate_rule(self.store, project, row, now, self.interval_s):
            if s["firing"]:
                await ledger.record(self.store, project=project, rule=row["name"], group_key=s["group_key"],
                                    policy=policy, context=await _rule_context(self.store, project, row, s),
                                    now=now)
            elif s["firing"] is False and s["group_key"] in by_group:
                await ledger.settle(self.store, by_group[s["group_key"]], policy, now, cleared=True,
                                    context={"value": s["value"]})

    async def _tick(self, now: datetime, user_rules: dict, policy_for) -> None:
        for a in await self.store.fetch("alerts_firing_all"):
            a = dict(a)
            if a["rule"].startswith("builtin:"):
                policy: Policy = policy_for(a["project_id"])
                cleared = a["rule"] in builtins.PARKED and await builtins.parked_cleared(self.store, a)
            else:
                row = user_rules.get((a["project_id"], a["rule"]))
                cleared = row is None          # its rule was removed
                policy = rule_store.policy(row) if row is not None else Policy(
                    a["context"].get("notify"), None, a["severity"], 1.0, 1)
            if not cleared and not tick(State.from_json(a["machine"]), policy, now)[1]:
                continue        # nothing to say: no transaction
            await ledger.settle(self.store, a, policy, now, cleared=cleared,
                                context={"resolved_by": "rule removed"} if row_removed(a, user_rules) else None)


def _window_s(row) -> float:
    try:
        return parse_condition(row["condition"]).window_s or 0.0
    except A44Error:
        return 0.0


def row_removed(alert: dict, user_rules: dict) -> bool:
    return not alert["rule"].startswith("builtin:") and (alert["project_id"], alert["rule"]) not in user_rules


async def _rule_context(store, project: str, row, s: dict) -> dict:
    """A rule's alert: the series, its value, and the causes behind the value where the metric has them (the
    newest dead letters of a DLQ, with their runs, codes, attempts and partitions, and the redrive command)."""
    labels = ", ".join(f'{k}="{v}"' for k, v in sorted(s["labels"].items()))
    ctx = {"metric": row["metric"], "labels": s["labels"], "condition": row["condition"], "value": s["value"],
           "notify": row["notify"]}
    queue = s["labels"].get("queue")
    if row["metric"] == sampler.DLQ and queue:
        causes = await dead_letter_context(store, project, queue)
        letters = causes.get("dead_letters", [])
        ctx.update(causes, causes=dead_letter_causes(letters, len(letters)) if letters else [])
        if int(s["value"] or 0) > len(letters):
            ctx["dead_letters_more"] = int(s["value"]) - len(letters)     # listed: the newest MAX_CAUSES
    elif row["metric"] == "automation.runs" and s["labels"].get("state") in CAUSED_STATES:
        ctx.update(await runs_context(store, project, s["labels"]["workflow"], s["labels"]["state"]))
    elif queue:
        ctx["next_action"] = f"a44 automation queues stats --project {project}"
    ctx["title"] = f"{row['name']}: {row['metric']}{{{labels}}} {row['condition']} (value {s['value']:g})"
    return ctx
