"""A step transition is one statement (migration 0018, engine/journal.py): no BEGIN/COMMIT round trips, one
`engine_commit` call per transition, and an operation kind is one SQL function the dispatcher finds by name."""

from collections import Counter
from contextlib import contextmanager

import pytest

from anthares44.automation.attempts import Attempt
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine.journal import Batch, Lease, LeaseLost
from tests.runtime.engine_support import Script, engine, node, publish_and_run, run_row, watch_statements, workflow
from tests.runtime.pg import query


@contextmanager
def statements():
    """What the driver sends: simple queries (BEGIN, COMMIT, resets) by first word, parameterised statements as
    `engine_commit` (autocommit or not; one run's or a group's, `engine_commit_many`) or `other`."""
    seen: Counter[str] = Counter()

    def note(conn, q):
        if " " not in q:
            seen[q] += 1
        elif "automation.engine_commit_v2(" in q or "automation.engine_commit_many_v2(" in q:
            seen["engine_commit in a transaction" if conn.is_in_transaction() else "engine_commit"] += 1
        else:
            seen["other"] += 1

    with watch_statements(note):
        yield seen


def test_an_effect_step_transition_is_one_round_trip(store, clock, aio):
    s = Script()
    run_id = aio(publish_and_run(store, workflow([node("a"), node("b"), node("c")], [("a", "b"), ("b", "c")])))
    eng = engine(store, s, clock=clock)
    with statements() as seen:
        assert aio(eng.drive()) == {run_id: "succeeded"}
    assert [c[0] for c in s.calls] == ["a", "b", "c"]
    # start a; finish a + start b; finish b + start c; finish c + the final transition: four statements
    assert seen["engine_commit"] == 4 and seen["engine_commit in a transaction"] == 0, seen
    assert seen["begin"] == seen["commit"] <= 2, seen       # the claim and the run's load; none per transition


class MarkingBatch(Batch):
    """A new operation kind, added the documented way: a Batch method appending ("<kind>", arguments)."""

    def mark(self, note: str, kind: str = "test_mark") -> None:
        self._ops.append((kind, dict(run_id=self.lease.run_id, note=note)))


def test_an_operation_kind_is_one_function_applied_in_order_and_all_or_nothing(store, pg_url, clock, aio):
    """A refusal anywhere in the batch (an unknown kind, an attempt not running: SQLSTATE A44NR) writes nothing."""
    query(pg_url, """
        create function automation.engine_op_test_mark(op jsonb) returns bigint language plpgsql as $$
        declare ev bigint;
        begin
            insert into automation.run_events (run_id, project_id, at, kind, message)
            select r.run_id, r.project_id, now(), 'test.mark', op ->> 'note'
            from automation.runs r where r.run_id = op ->> 'run_id'
            returning id into ev;
            return ev;
        end $$""")
    run_id = aio(publish_and_run(store, workflow([node("a")])))
    eng = engine(store, clock=clock)
    (row,) = aio(eng.claim())
    lease = Lease(run_id, row["project_id"], row["workflow_id"], eng.worker_id, row["lease_grants"], row["epoch"])

    def kinds():
        return [(e["kind"], e["message"]) for e in aio(store.list_run_events(run_id))
                if e["kind"] in ("test.mark", "run.alert")]

    b = MarkingBatch(store, lease, eng.worker_id)
    b.mark("first")
    b.event("run.alert", clock.now(), message="between")
    b.mark("second")
    aio(b.commit(clock.now()))
    assert kinds() == [("test.mark", "first"), ("run.alert", "between"), ("test.mark", "second")]

    b = MarkingBatch(store, lease, eng.worker_id)
    b.mark("lost")
    b.start("a", 1, "action", clock.now())
    b.mark("nope", kind="no_such_kind")       # no function: the statement fails and writes nothing
    with pytest.raises(A44Error) as exc:
        aio(b.commit(clock.now()))
    assert exc.value.code == "E_DB_SCHEMA", exc.value
    assert kinds() == [("test.mark", "first"), ("run.alert", "between"), ("test.mark", "second")]
    assert aio(store.list_attempts(run_id)) == [] and aio(run_row(store, run_id))["state"] == "running"

    b = Batch(store, lease, eng.worker_id)
    b.event("run.alert", clock.now(), message="lost too")
    b.finish(Attempt("a", "action", 1, "running", clock.now()), "succeeded", clock.now(), result={"x": 1})
    with pytest.raises(LeaseLost, match="attempt 1 of a is not running any more"):
        aio(b.commit(clock.now()))
    assert kinds() == [("test.mark", "first"), ("run.alert", "between"), ("test.mark", "second")]


def test_a_transition_that_moves_the_run_writes_its_row_once(store, pg_url, clock, aio):
    """Migration 0028: with a run_transition in the batch the fence only locks the row and the transition writes
    it (with current_step); without one the fence writes current_step as before. A refused transition (A44IT)
    still writes nothing."""
    query(pg_url, "create table public.run_row_writes (run_id text, current_step text)")
    query(pg_url, """
        create function public.note_run_row_write() returns trigger language plpgsql as $$
        begin insert into public.run_row_writes values (new.run_id, new.current_step); return new; end $$""")
    query(pg_url, """create trigger note_run_row_write before update on automation.runs
                     for each row execute function public.note_run_row_write()""")
    run_id = aio(publish_and_run(store, workflow([node("a"), node("b")])))
    eng = engine(store, clock=clock)
    (row,) = aio(eng.claim())
    lease = Lease(run_id, row["project_id"], row["workflow_id"], eng.worker_id, row["lease_grants"], row["epoch"])

    def writes():
        return [r["current_step"] for r in query(pg_url, "select current_step from public.run_row_writes")]

    def commit(*fill):
        b = Batch(store, lease, eng.worker_id)
        out = [f(b) for f in fill]
        aio(b.commit(clock.now()))
        return out

    query(pg_url, "delete from public.run_row_writes")        # the claim's write
    (a,) = commit(lambda b: b.start("a", 1, "action", clock.now()))
    assert writes() == ["a"]                                  # no transition: the fence writes current_step
    commit(lambda b: b.finish(a, "succeeded", clock.now()), lambda b: b.start("b", 1, "action", clock.now()),
           lambda b: b.transition("running", clock.now()))
    assert writes() == ["a", "b"]                             # one write for fence + transition, current_step in it
    started = aio(run_row(store, run_id))["updated_at"]

    clock.advance(5)
    b = Batch(store, lease, eng.worker_id)
    b.start("c", 1, "action", clock.now())
    b.transition("pending", clock.now())
    b.transition("waiting", clock.now())                      # pending -> waiting is refused: nothing is written
    with pytest.raises(A44Error) as exc:
        aio(b.commit(clock.now()))
    assert exc.value.code == "E_ILLEGAL_TRANSITION"
    assert writes() == ["a", "b"] and [x["step_id"] for x in aio(store.list_attempts(run_id))] == ["a", "b"]

    (bb,) = [x for x in aio(store.list_attempts(run_id)) if x["step_id"] == "b"]
    commit(lambda b: b.finish(Attempt("b", "action", 1, "running", bb["started_at"]), "succeeded", clock.now()),
           lambda b: b.transition("succeeded", clock.now(), finished=True))
    assert writes() == ["a", "b", None]                       # the final transition: one write; a finished run has
                                                              # no current step (migration 0030)
    r = aio(run_row(store, run_id))
    assert (r["state"], r["current_step"]) == ("succeeded", None) and r["updated_at"] > started
