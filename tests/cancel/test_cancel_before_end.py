"""A cancel that lands between a run's last step and the commit that ends it (docs/states.md "Cancel", the
interleavings): the API answered `requested`, but the driver has not heard of it (its NOTIFY is still on the way,
or the daemon is reconnecting). The end commit sees the request under the row lock (migration 0045,
`engine_commit_v2`): it writes nothing, and the driver ends the run `cancelled` instead, with the last step's
attempt recorded as it happened, or compensates first when asked. Driven on purpose: the test commits the cancel
just before the batch that ends the run, for a YAML and a Python workflow, through the group committer and alone."""

from __future__ import annotations

import pytest

from anthares44.automation.runtime.engine.cancels import cancel
from anthares44.automation.runtime.engine.journal import Batch
from anthares44.automation.runtime.engine.states import is_legal
from tests.code.support import published_code
from tests.runtime.engine_support import (
    PROJECT,
    Script,
    attempts,
    engine,
    node,
    publish_and_run,
    state_changes,
    workflow,
)


def cancel_before_the_end(monkeypatch, store, **kw) -> list[dict]:
    """Patch Batch.commit: the first batch that would end a run has a person's cancel committed just before it,
    unheard by the driver. Returns the cancels' answers."""
    commit, answers = Batch.commit, []

    async def commit_after_a_cancel(self, at):
        if self._end_at is not None and not answers:
            answers.append(await cancel(store, PROJECT, self.lease.run_id, by="ana", reason="too late?", **kw))
        return await commit(self, at)

    monkeypatch.setattr(Batch, "commit", commit_after_a_cancel)
    return answers


@pytest.mark.parametrize("group", [True, False], ids=["group-commit", "alone"])
def test_a_cancel_between_the_last_step_and_the_end_ends_the_run_cancelled(store, aio, clock, monkeypatch, group):
    run_id = aio(publish_and_run(store, workflow([node("a"), node("b")])))
    answers = cancel_before_the_end(monkeypatch, store)
    eng = engine(store, Script(), clock=clock)
    if not group:
        eng.committer = None
    assert aio(eng.drive()) == {run_id: "cancelled"}
    assert [(a["outcome"], a["state"]) for a in answers] == [("requested", "running")]
    # the last step's effect happened and is recorded: the cancel did not lose it, nor run it again
    assert aio(attempts(store, run_id)) == [("a", "action", 1, "succeeded", None), ("b", "action", 1, "succeeded", None)]
    run = aio(store.get_run(run_id))
    assert (run["state"], run["error_code"], run["error_message"]) == \
        ("cancelled", "E_RUN_CANCELLED", "cancelled by ana: too late?")
    changes = aio(state_changes(store, run_id))
    assert changes[-1] == ("running", "cancelled") and all(is_legal(x, y) for x, y in changes)
    assert "succeeded" not in [y for _, y in changes]


def test_with_compensate_the_completed_steps_are_undone_first(store, aio, clock, monkeypatch):
    run_id = aio(publish_and_run(store, workflow([node("a", compensate="undo"), node("b", compensate="undo")])))
    cancel_before_the_end(monkeypatch, store, compensate=True)
    undo = Script("undo")
    eng = engine(store, Script(), undo, clock=clock)
    assert aio(eng.drive()) == {run_id: "compensating"}      # the first compensation waits 5 s, durably
    for _ in range(2):
        clock.advance(5)
        aio(eng.drive())
    assert [(c[0], c[1]) for c in undo.calls] == [("b", "compensation"), ("a", "compensation")]
    run = aio(store.get_run(run_id))
    assert (run["state"], run["error_code"]) == ("cancelled", "E_RUN_CANCELLED")
    assert aio(state_changes(store, run_id))[-2:] == [("running", "compensating"), ("compensating", "cancelled")]


CODE = '''from anthares44.automation import workflow, step


def undo_a():
    return {"undone": "A"}


@workflow("late-cancel", version=1)
async def late(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"}, compensate=undo_a)
    await step.run("b", fn=lambda: {"id": "B"})
    return {"done": True}
'''


def test_a_python_workflow_ends_cancelled_too(store, aio, clock, monkeypatch, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "late_cancel.py", CODE)
        run_id = (await auto.run("late-cancel", {}, "c1")).run_id
        answers = cancel_before_the_end(monkeypatch, store)
        assert await engine(store, clock=clock).drive() == {run_id: "cancelled"}
        assert [a["outcome"] for a in answers] == ["requested"]
        assert await attempts(store, run_id) == [("a", "action", 1, "succeeded", None),
                                                 ("b", "action", 1, "succeeded", None)]
        run = await store.get_run(run_id)
        assert (run["state"], run["result"]) == ("cancelled", None)

    aio(body())


def test_a_run_that_ended_first_refuses_the_cancel(store, aio, clock):
    """The other order: the end commits, then the cancel finds the run finished (409), nothing changes."""
    from anthares44.automation.errors import A44Error

    run_id = aio(publish_and_run(store, workflow([node("a")])))
    assert aio(engine(store, Script(), clock=clock).drive()) == {run_id: "succeeded"}
    with pytest.raises(A44Error) as info:
        aio(cancel(store, PROJECT, run_id, by="ana"))
    assert info.value.code == "E_CANCEL_NOT_ALLOWED"
    run = aio(store.get_run(run_id))
    assert (run["state"], run["error_code"]) == ("succeeded", None)
