"""One model of a run's recorded attempts: the DAG driver's `Progress`, the code driver's `History` and replay's
plan read the same `step_attempts` rows into the same `Attempt` / `StepAttempts` objects."""

from datetime import timedelta

from anthares44.automation.attempts import Attempt, StepAttempts
from anthares44.automation.runtime.engine.progress import Progress
from anthares44.automation.runtime.replay import _attempts_in_log_order
from anthares44.automation.sdk import History
from tests.runtime.engine_support import Script, engine, node, publish_and_run, workflow


def test_every_reader_of_attempt_rows_builds_the_same_attempts(store, clock, aio):
    ir = workflow([node("a", retry=(2, "fixed")), node("b")])
    run_id = aio(publish_and_run(store, ir))
    eng = engine(store, Script(plan={"a": ["retry", "ok"]}), clock=clock)
    assert aio(eng.drive()) == {run_id: "waiting"}
    clock.advance(timedelta(seconds=1))
    assert aio(eng.drive()) == {run_id: "succeeded"}

    def read(query, load=store.load_result, **params):      # each query has its own order; compare by identity
        rows = aio(store.fetch(query, **params))
        return sorted((Attempt.from_row(r, load) for r in rows), key=lambda a: (a.step_id, a.kind, a.attempt))

    dag = read("engine_attempts_of_run", run_id=run_id, epoch=0)
    code = read("code_attempts_of_run", run_id=run_id, epoch=0)
    # replay's plan: its attempts with their log order matched in from replay_attempt_events (one read each)
    replayed = sorted(aio(_attempts_in_log_order(store, [run_id]))[run_id],
                      key=lambda a: (a.step_id, a.kind, a.attempt))
    assert [(a.step_id, a.attempt, a.status) for a in dag] == [("a", 1, "failed"), ("a", 2, "succeeded"),
                                                               ("b", 1, "succeeded")]

    def strip(a: Attempt) -> Attempt:      # what only one reader asks for: the log order
        return Attempt(**{**a.__dict__, "seq": None})

    assert [strip(a) for a in code] == dag
    assert dag[0].error_code == "E_UPSTREAM_503" and dag[0].retry_at is not None
    assert dag[1].result["attempt"] == 2
    # replay reads timing and order only; what it reads is the same attempt
    assert [(a.step_id, a.kind, a.attempt, a.status, a.started_at, a.finished_at) for a in replayed] == \
        [(a.step_id, a.kind, a.attempt, a.status, a.started_at, a.finished_at) for a in dag]
    assert all(a.seq is not None for a in replayed) and dag[1].duration_s is not None

    progress, history = Progress(ir, dag, ["a", "b"]), History.of(code)
    for sid in ("a", "b"):
        assert isinstance(progress.steps[sid], StepAttempts) and isinstance(history.steps[sid], StepAttempts)
        assert [strip(a) for a in history.steps[sid].actions] == progress.steps[sid].actions
        assert history.steps[sid].counted_failures == progress.steps[sid].counted_failures == (1 if sid == "a" else 0)
