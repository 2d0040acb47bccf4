"""The built-in alert on overdue approvals (docs/approvals.md) and the metrics: an approval past its first reminder
raises `builtin:approval_overdue` at the evaluator's next round (no rule declared), counted in
`automation_approvals_overdue`, `automation_waits_open{kind="approval"}`; deciding it clears the alert."""

from __future__ import annotations

from anthares44.automation.app.metrics import collect
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from anthares44.automation.runtime.approvals.decisions import decide
from tests.approvals.support import HOUR_MS, gated, groups, start
from tests.runtime.engine_support import PROJECT, Script, engine


def _firing(store, aio) -> list[tuple[str, int]]:
    return [(a["rule"], a["context"].get("count")) for a in aio(store.fetch("alerts_firing_all"))
            if a["rule"] == "builtin:approval_overdue"]


def _samples(store, aio) -> dict:
    families = {f.name: f for f in aio(collect(store))}
    return {name: [(labels, value) for _, labels, value in families[name].samples]
            for name in ("automation_approvals_overdue", "automation_waits_open")}


def test_an_overdue_approval_raises_the_builtin_alert_until_it_is_decided(store, clock, aio):
    aio(groups(store, finance_leads=["alice"]))
    run_id = aio(start(store, gated(remind_ms=(HOUR_MS,), timeout_ms=10 * HOUR_MS)))
    aio(engine(store, Script(), clock=clock).drive())
    ev = Evaluator(store, holder="d1", interval_s=15, clock=clock)
    assert aio(ev.step()) is True and _firing(store, aio) == []
    assert _samples(store, aio)["automation_approvals_overdue"] == []
    assert ({"project": PROJECT, "kind": "approval"}, 1) in _samples(store, aio)["automation_waits_open"]
    clock.advance(3600)
    assert aio(ev.step()) is True
    assert _firing(store, aio) == [("builtin:approval_overdue", 1)]
    assert _samples(store, aio)["automation_approvals_overdue"] == [({"project": PROJECT}, 1)]
    aio(decide(store, PROJECT, run_id, "sign-off", "alice", "approve"))
    clock.advance(15)
    assert aio(ev.step()) is True
    assert _firing(store, aio) == []
