"""Alert rules and alerts as a Python API (the CLI's `a44 monitor` verbs call these; docs/alerts.md):

    async with await Automation.connect(project="pj_billing") as auto:
        a = Alerts(auto)
        await a.create("dlq-invoice-settle", metric="automation.dlq_depth", filter='queue="q_invoice_settle"',
                       condition="min_over_time(10m) > 0", severity="p2", notify="squad-billing")
        await a.test("dlq-invoice-settle")          # the verdict per series now, sending nothing
        await a.builtin(notify="squad-billing", escalate_to="oncall")   # where the built-in alerts go
        await a.alerts(state="firing")              # alerts with their history
"""

from __future__ import annotations

from ..errors import E_ALERT_RULE_INVALID, A44Error
from ..grammar.alert_rules import check_routing, check_rule
from ..runtime.alerts import rules
from ..runtime.alerts.evaluator import DEFAULT_INTERVAL_S, evaluate_rule
from .contract.services import AlertsService

ALERT_STATES = ("firing", "resolved")


def alert_interval(text: str | None) -> float | None:
    """A44_ALERT_INTERVAL in seconds (default 15); `off`: None (this daemon never evaluates alerts)."""
    from ..durations import parse_duration

    if text is not None and text.strip().lower() == "off":
        return None
    seconds = parse_duration(text).total_seconds() if text else 15.0
    if seconds < 1:
        raise ValueError(f"A44_ALERT_INTERVAL={text!r}: the alert interval must be at least 1s (or off)")
    return seconds


def sampling_interval(text: str | None) -> float:
    """The interval `Alerts.test` assumes the samples were taken at: A44_ALERT_INTERVAL's, else the default (also
    when it is `off` or unreadable: `serve` refuses those, a test still has an answer)."""
    try:
        return alert_interval(text) or DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


class Alerts(AlertsService):
    def __init__(self, auto, *, interval_s: float = DEFAULT_INTERVAL_S):
        self.store, self.project, self.interval_s = auto.store, auto.project, interval_s

    async def create(self, name: str, *, metric: str, condition: str, filter: str = "", severity: str = "p3",
                     notify: str | None = None, escalate_to: str | None = None, suppress_window: str | None = None,
                     update_every: int | None = None, origin: str = "cli") -> dict:
        rule = check_rule(name=name, metric=metric, filter=filter, condition=condition, severity=severity,
                          notify=notify, escalate_to=escalate_to, suppress_window=suppress_window,
                          update_every=update_every)
        outcome = await rules.upsert(self.store, self.project, rule, origin=origin)
        return {"outcome": outcome, **await self.show(name)}

    async def builtin(self, *, notify: str | None, escalate_to: str | None = None, severity: str = "p2",
                      suppress_window: str | None = None, update_every: int | None = None) -> dict:
        severity, window, every = check_routing(severity, suppress_window, update_every)
        outcome = await rules.upsert_builtin(self.store, self.project, notify=notify, escalate_to=escalate_to,
                                             severity=severity, window_s=window, update_every=every)
        return {"outcome": outcome, **await self.show(rules.BUILTIN)}

    async def list(self) -> list[dict]:
        return await rules.list_rules(self.store, self.project)

    async def show(self, name: str) -> dict:
        return await rules.get(self.store, self.project, name)

    async def rm(self, name: str) -> None:
        await rules.delete(self.store, self.project, name)

    async def test(self, name: str) -> dict:
        """The rule's verdict per series now, from the stored samples; nothing is recorded or sent."""
        row = await self.show(name)
        if row["metric"] == rules.BUILTIN:
            raise A44Error(E_ALERT_RULE_INVALID, "the built-in alerts have no condition to test",
                           hint="they fire on run outcomes and DLQ growth: `a44 monitor alerts`")
        series = await evaluate_rule(self.store, self.project, row, self.store.clock.now(), self.interval_s)
        return {"rule": name, "metric": row["metric"], "filter": row["filter"], "condition": row["condition"],
                "firing": any(s["firing"] for s in series), "series": series}

    async def alerts(self, *, state: str | None = None, limit: int = 50) -> list[dict]:
        """Alerts firing first, then newest, each with its history (transitions and where they were sent)."""
        if state is not None and state not in ALERT_STATES:
            raise A44Error(E_ALERT_RULE_INVALID, f"--state {state!r} is not one of {', '.join(ALERT_STATES)}")
        rows = [dict(r) for r in await self.store.fetch("alerts_list", project=self.project, state=state,
                                                         limit=limit)]
        history: dict[str, list[dict]] = {}
        for h in await self.store.fetch("alert_history_of", alert_ids=[r["alert_id"] for r in rows]):
            history.setdefault(h["alert_id"], []).append(
                {"at": h["at"], "kind": h["kind"], "count": h["count"], "channels": list(h["channels"])})
        out = []
        for r in rows:
            machine = r.pop("machine")
            out.append({**r, "count": machine["count"], "escalated": machine["escalated"],
                        "history": history.get(r["alert_id"], [])})
        return out
