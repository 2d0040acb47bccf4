"""Approval policy (§20, docs/approvals.md) on the real engine and PostgreSQL with a ManualClock: `min` distinct
approvers end the step approved (one person twice counts once), a reject ends it rejected (E_APPROVAL_REJECTED, not
retried), the initiator cannot approve unless allowSelf, a non-member is refused, a decision after the timeout or
after the close gets E_APPROVAL_CLOSED, the audit holds exactly the accepted decisions and refuses changes, and the
races on the one wait row (decision vs timeout, decision vs cancel, two deciders) give one outcome."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.approvals.decisions import decide, open_requests
from tests.approvals.support import HOUR_MS, audit, gated, groups, output, start, wait_row
from tests.runtime.engine_support import PROJECT, Script, attempts, engine, run_row


def refused(aio, coro) -> A44Error:
    with pytest.raises(A44Error) as e:
        aio(coro)
    return e.value


def test_two_distinct_approvers_end_it_approved_and_one_approver_twice_counts_once(store, clock, aio):
    aio(groups(store, finance_leads=["alice", "bob", "carol"]))
    run_id = aio(start(store, gated(min=2)))
    eng = engine(store, Script(), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    first = aio(decide(store, PROJECT, run_id, "sign-off", "alice", "approve", comment="ok", via="cli"))
    again = aio(decide(store, PROJECT, run_id, "sign-off", "alice", "approve", via="rest"))
    assert (first["outcome"], first["approvals"]) == ("recorded", 1)
    assert (again["outcome"], again["approvals"]) == ("duplicate", 1)       # idempotent, not a second approval
    assert aio(wait_row(store, run_id))["state"] == "open"
    assert aio(eng.drive()) == {}                                             # still waiting: nothing due
    done = aio(decide(store, PROJECT, run_id, "sign-off", "bob", "approve", via="link"))
    assert (done["outcome"], done["approvals"], done["needed"]) == ("approved", 2, 2)
    assert aio(eng.drive()) == {run_id: "succeeded"}
    out = aio(output(store, run_id))
    assert (out["kind"], out["decision"], out["by"]) == ("approval", "approve", "bob")
    assert [(p["person"], p["decision"], p["via"]) for p in out["approvers"]] == [("alice", "approve", "cli"),
                                                                               ("bob", "approve", "link")]
    rows = aio(audit(store, run_id))
    assert [(r["person"], r["decision"], r["comment"], r["via"]) for r in rows] == [
        ("alice", "approve", "ok", "cli"), ("bob", "approve", None, "link")]   # audit rows = accepted decisions


def test_a_reject_fails_the_step_for_good_with_E_APPROVAL_REJECTED(store, clock, aio):
    aio(groups(store, finance_leads=["alice", "bob"]))
    run_id = aio(start(store, gated(min=2)))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    assert aio(decide(store, PROJECT, run_id, "sign-off", "alice", "reject", comment="no budget"))["outcome"] == \
        "rejected"
    assert aio(eng.drive()) == {run_id: "failed"}
    assert ("sign-off", "action", 1, "failed", "E_APPROVAL_REJECTED") in aio(attempts(store, run_id))
    assert aio(run_row(store, run_id))["error_code"] == "E_APPROVAL_REJECTED"
    e = refused(aio, decide(store, PROJECT, run_id, "sign-off", "bob", "approve"))
    assert e.code == "E_APPROVAL_CLOSED"


def test_the_initiator_is_refused_unless_allow_self_and_a_non_member_is_refused(store, clock, aio):
    aio(groups(store, finance_leads=["alice", "local:ops"]))
    run_id = aio(start(store, gated(), initiator="local:ops"))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    assert refused(aio, decide(store, PROJECT, run_id, "sign-off", "local:ops", "approve")).code == "E_SELF_APPROVAL"
    assert refused(aio, decide(store, PROJECT, run_id, "sign-off", "mallory", "approve")).code == "E_NOT_APPROVER"
    assert aio(audit(store, run_id)) == []                                   # refusals are not decisions
    other = aio(start(store, gated("t2", allow_self=True), initiator="local:ops", key="k2"))
    aio(eng.drive())
    assert aio(decide(store, PROJECT, other, "sign-off", "local:ops", "approve"))["outcome"] == "approved"


def test_a_decision_after_the_timeout_gets_409_even_before_the_engine_looks(store, clock, aio):
    aio(groups(store, finance_leads=["alice"]))
    run_id = aio(start(store, gated(timeout_ms=2 * HOUR_MS, on_timeout="continue")))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(2 * 3600)                     # at the timeout instant; no visit has looked yet
    e = refused(aio, decide(store, PROJECT, run_id, "sign-off", "alice", "approve"))
    assert (e.code, e.details["state"]) == ("E_APPROVAL_CLOSED", "timed_out")
    assert aio(audit(store, run_id)) == []
    assert aio(eng.drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id)) == {"kind": "approval", "decision": "timeout"}


def test_on_timeout_reject_fails_the_step_with_E_APPROVAL_REJECTED(store, clock, aio):
    aio(groups(store, finance_leads=["alice"]))
    run_id = aio(start(store, gated(timeout_ms=HOUR_MS)))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    clock.advance(3600)
    assert aio(eng.drive()) == {run_id: "failed"}
    assert aio(run_row(store, run_id))["error_code"] == "E_APPROVAL_REJECTED"
    assert aio(wait_row(store, run_id))["state"] == "timed_out"


def test_a_cancel_closes_the_request_and_a_later_decision_gets_409(store, clock, aio):
    from anthares44.automation.runtime.engine.cancels import cancel

    aio(groups(store, finance_leads=["alice"]))
    run_id = aio(start(store, gated()))
    aio(engine(store, Script(), clock=clock).drive())
    aio(cancel(store, PROJECT, run_id, by="ops"))
    e = refused(aio, decide(store, PROJECT, run_id, "sign-off", "alice", "approve"))
    assert (e.code, e.details["state"]) == ("E_APPROVAL_CLOSED", "cancelled")


def test_escalation_adds_its_groups_as_deciders_at_its_instant(store, clock, aio):
    aio(groups(store, finance_leads=["alice"], cfo=["dave"]))
    run_id = aio(start(store, gated(escalate_after_ms=48 * HOUR_MS, escalate_groups=("cfo",))))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())
    assert refused(aio, decide(store, PROJECT, run_id, "sign-off", "dave", "approve")).code == "E_NOT_APPROVER"
    clock.advance(48 * 3600)
    assert aio(decide(store, PROJECT, run_id, "sign-off", "dave", "approve"))["outcome"] == "approved"


def test_another_projects_run_is_not_found_and_no_request_is_404(store, clock, aio):
    aio(groups(store, finance_leads=["alice"]))
    aio(groups(store, "pj_other", finance_leads=["alice"]))
    run_id = aio(start(store, gated()))
    assert refused(aio, decide(store, PROJECT, run_id, "sign-off", "alice", "approve")).code == \
        "E_APPROVAL_NOT_FOUND"                                          # not reached yet
    aio(engine(store, Script(), clock=clock).drive())
    assert refused(aio, decide(store, "pj_other", run_id, "sign-off", "alice", "approve")).code == \
        "E_RUN_NOT_FOUND"
    assert aio(audit(store, run_id)) == []


def test_a_huge_comment_or_a_bad_decision_is_refused_before_anything_is_written(store, clock, aio):
    aio(groups(store, finance_leads=["alice"]))
    run_id = aio(start(store, gated()))
    aio(engine(store, Script(), clock=clock).drive())
    assert refused(aio, decide(store, PROJECT, run_id, "sign-off", "alice", "approve",
                               comment="x" * 1_000_000)).code == "E_APPROVAL_INVALID"
    assert refused(aio, decide(store, PROJECT, run_id, "sign-off", "alice", "maybe")).code == "E_APPROVAL_INVALID"
    assert aio(audit(store, run_id)) == []


def test_the_audit_is_append_only(store, clock, aio):
    aio(groups(store, finance_leads=["alice", "bob"]))
    run_id = aio(start(store, gated(min=2)))
    aio(engine(store, Script(), clock=clock).drive())
    aio(decide(store, PROJECT, run_id, "sign-off", "alice", "approve"))

    async def tamper(sql):
        conn = await asyncpg.connect(store.url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
    for sql in ("update automation.approval_decisions set decision = 'reject'",
                "delete from automation.approval_decisions"):
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            aio(tamper(sql))
    assert [r["decision"] for r in aio(audit(store, run_id))] == ["approve"]


def test_two_deciders_at_once_and_a_decision_racing_the_timeout_give_one_outcome(store, clock, aio):
    """The races on the one wait row: ten people approve at once (min 1): one closes it, the others get 409;
    at the timeout instant, a decision and the engine's timeout race: exactly one of them is the outcome."""
    aio(groups(store, finance_leads=[f"p{i}" for i in range(10)]))
    run_id = aio(start(store, gated()))
    eng = engine(store, Script(), clock=clock)
    aio(eng.drive())

    async def all_at_once():
        return await asyncio.gather(*(decide(store, PROJECT, run_id, "sign-off", f"p{i}", "approve")
                                      for i in range(10)), return_exceptions=True)
    results = aio(all_at_once())
    assert sum(1 for r in results if isinstance(r, dict) and r["outcome"] == "approved") == 1
    assert all(r.code == "E_APPROVAL_CLOSED" for r in results if isinstance(r, A44Error))
    assert len(aio(audit(store, run_id))) == 1
    assert aio(eng.drive()) == {run_id: "succeeded"}

    raced = aio(start(store, gated("t2", timeout_ms=HOUR_MS, on_timeout="continue"), key="k2"))
    aio(eng.drive())
    clock.advance(3600)

    async def race():
        return await asyncio.gather(decide(store, PROJECT, raced, "sign-off", "p1", "approve"), eng.drive(),
                                    return_exceptions=True)
    decided, _ = aio(race())
    aio(eng.drive())
    w = aio(wait_row(store, raced))
    out = aio(output(store, raced))
    if isinstance(decided, A44Error):       # the timeout won: no decision recorded, the step continued
        assert (decided.code, w["state"], out["decision"]) == ("E_APPROVAL_CLOSED", "timed_out", "timeout")
        assert aio(audit(store, raced)) == []
    else:                                   # at the instant itself the timeout comes first (timeout_at <= now)
        raise AssertionError(f"a decision at the timeout instant was accepted: {decided}")


def test_approvals_lists_what_waits_for_whom_mine_and_overdue(store, clock, aio):
    aio(groups(store, finance_leads=["alice", "bob"]))
    run_id = aio(start(store, gated(min=2, remind_ms=(24 * HOUR_MS,))))
    aio(engine(store, Script(), clock=clock).drive())
    [row] = aio(open_requests(store, PROJECT))
    assert (row["run_id"], row["step_id"], row["deciders"], row["approvals"]) == (run_id, "sign-off",
                                                                                 ["alice", "bob"], 0)
    assert aio(open_requests(store, PROJECT, overdue=True)) == []
    aio(decide(store, PROJECT, run_id, "sign-off", "alice", "approve"))
    assert aio(open_requests(store, PROJECT, person="alice")) == []          # decided: not hers any more
    assert [r["run_id"] for r in aio(open_requests(store, PROJECT, person="bob"))] == [run_id]
    clock.advance(24 * 3600)
    assert [r["run_id"] for r in aio(open_requests(store, PROJECT, overdue=True))] == [run_id]


def test_a_decision_between_the_open_and_the_release_makes_the_run_due_at_once(store, clock, aio, monkeypatch):
    """The request opens, then a decision closes it while the visit still holds the lease (it cannot wake a leased
    run), then the visit releases the run to `waiting`: the release's wait check makes it due now, and the same
    drive finishes it."""
    from anthares44.automation.runtime.engine import strategies
    from anthares44.automation.runtime.engine.approvals import Approval

    class DecideAfterOpen(Approval):
        async def advance(self, v, p, sp, now, dues):
            done = await super().advance(v, p, sp, now, dues)
            if not done:
                assert (await decide(v.store, PROJECT, v.lease.run_id, sp.node.id, "alice", "approve"))[
                    "outcome"] == "approved"
            return done

    monkeypatch.setitem(strategies.STEP_KINDS, "approval", DecideAfterOpen())
    aio(groups(store, finance_leads=["alice"]))
    run_id = aio(start(store, gated()))
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    assert aio(output(store, run_id))["by"] == "alice"
