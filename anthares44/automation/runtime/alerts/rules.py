"""Alert rules in the store: create or replace one (checking the channels it names exist), list, show, remove, and
the suppression policy a rule gives its alerts.

The built-in alerts (run failed / compensation_failed / awaiting_confirmation, DLQ growth) need no rule; a row
named `builtin` (metric `builtin`, `a44 monitor alert builtin --notify CH`) routes them. Without it they are
recorded, counted in /metrics and logged, with the default window and update count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...errors import E_ALERT_CHANNEL_UNKNOWN, E_ALERT_RULE_NOT_FOUND, A44Error
from ...grammar.alert_rules import BUILTIN, DEFAULT_UPDATE_EVERY, DEFAULT_WINDOW_S, Rule
from ...suggestions import closest, listing
from .suppression import Policy

BUILTIN_SEVERITY = "p2"


async def check_channels(store, project: str, *names: str | None, declared: tuple[str, ...] = ()) -> None:
    wanted = [n for n in names if n]
    if not wanted:
        return
    have = [r["name"] for r in await store.fetch("alert_channel_names", project=project)] + list(declared)
    for name in wanted:
        if name not in have:
            near = closest(name, have, 0.6)
            raise A44Error(E_ALERT_CHANNEL_UNKNOWN, f"project {project} has no notification channel {name!r}",
                           hint=(f"did you mean {near}? " if near else "")
                           + (f"channels: {listing(have)}" if have else "create one with `a44 monitor channel create`"
                              " or publish a `kind: channel` file"))


async def upsert(store, project: str, rule: Rule, *, origin: str = "cli") -> str:
    """created | updated | unchanged."""
    await check_channels(store, project, rule.notify, rule.escalate_to)
    return await store.fetchval("alert_rule_upsert", project=project, name=rule.name, metric=rule.metric,
                                filter=rule.filter_text(), condition=str(rule.condition), severity=rule.severity,
                                notify=rule.notify, escalate_to=rule.escalate_to, window_s=rule.suppress_window_s,
                                update_every=rule.update_every, origin=origin, now=store.clock.now())


async def upsert_builtin(store, project: str, *, notify: str | None, escalate_to: str | None, severity: str,
                         window_s: float, update_every: int) -> str:
    await check_channels(store, project, notify, escalate_to)
    return await store.fetchval("alert_rule_upsert", project=project, name=BUILTIN, metric=BUILTIN, filter="",
                                condition="", severity=severity, notify=notify, escalate_to=escalate_to,
                                window_s=window_s, update_every=update_every, origin="cli", now=store.clock.now())


@dataclass
class Published:
    """The channel and alert rule files of one publish: checked before anything of the publish is stored, then
    stored channels first (the rules name them)."""
    channels: list[tuple[str, str, dict]]       # name, type, config
    rules: list[Rule]

    async def check(self, store, project: str) -> None:
        declared = tuple(name for name, _, _ in self.channels)
        for rule in self.rules:
            await check_channels(store, project, rule.notify, rule.escalate_to, declared=declared)

    async def store(self, store, project: str) -> tuple[list, list]:
        channels = [(name, await store.fetchval("alert_channel_upsert", project=project, name=name, kind=kind,
                                                config=json.dumps(config, sort_keys=True), now=store.clock.now()))
                    for name, kind, config in self.channels]
        rules = [(r.name, await upsert(store, project, r, origin="yaml")) for r in self.rules]
        return channels, rules


async def list_rules(store, project: str) -> list[dict]:
    return [dict(r) for r in await store.fetch("alert_rules_list", project=project)]


async def get(store, project: str, name: str) -> dict:
    row = await store.fetchrow("alert_rule_get", project=project, name=name)
    if row is None:
        raise await _not_found(store, project, name)
    return dict(row)


async def delete(store, project: str, name: str) -> None:
    if await store.fetchval("alert_rule_delete", project=project, name=name) is None:
        raise await _not_found(store, project, name)


async def _not_found(store, project: str, name: str) -> A44Error:
    names = [r["name"] for r in await store.fetch("alert_rules_list", project=project)]
    near = closest(name, names, 0.6)
    return A44Error(E_ALERT_RULE_NOT_FOUND, f"project {project} has no alert rule {name!r}",
                    hint=f"did you mean {near}?" if near else "list them with `a44 monitor alert list`")


def policy(row) -> Policy:
    """The suppression policy of a rule row (the `builtin` one included)."""
    return Policy(channel=row["notify"], escalate_to=row["escalate_to"], severity=row["severity"],
                  window_s=float(row["suppress_window_s"]), update_every=int(row["update_every"]))


DEFAULT_BUILTIN = Policy(channel=None, escalate_to=None, severity=BUILTIN_SEVERITY, window_s=DEFAULT_WINDOW_S,
                         update_every=DEFAULT_UPDATE_EVERY)
