"""Row counts and expectations in the interpreter, on real PostgreSQL (§16, docs/rows.md): YAML compiled by the
real compiler, the summary adds steps' `rows` without double counting, a false `expect:` fails the step (not
retried) or the run, and the counts survive a takeover by another worker."""

import pytest

from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_text
from anthares44.automation.stdlib_connectors.pass_ import PassConnector
from tests.runtime.engine_support import attempts, engine, publish_and_run, run_row


def compiled(text: str):
    res = compile_sources([load_text(text, "w.yaml")], "lint", lower=True)
    assert not res.diagnostics, [d.message for d in res.diagnostics]
    (ir,) = res.irs.values()
    return ir


ETL = """
name: etl
version: 1
steps:
  - id: extract
    uses: pass
    timeout: 1s
    output: {count: "{{ input.n }}"}
    rows: {in: "int(result.count)", out: "int(result.count)"}
  - id: transform
    uses: pass
    timeout: 1s
    output: {kept: "{{ input.n - 2 }}", bad: 2}
    rows: {in: "int(result.kept) + result.bad", out: "int(result.kept)", error: "result.bad"}
  - id: load
    uses: pass
    timeout: 1s
    output: {written: "{{ input.n - 2 }}"}
    rows: {in: "int(result.written)", out: "int(result.written)"}
"""


def test_three_steps_report_rows_and_the_run_counts_each_row_once(store, clock, aio):
    ir = compiled(ETL)
    run_id = aio(publish_and_run(store, ir, input={"n": 10}))
    assert aio(engine(store, PassConnector(), clock=clock).drive()) == {run_id: "succeeded"}
    s = aio(run_row(store, run_id))["summary"]
    # in = what the first step read, out = what the last step wrote, error = every rejected row once
    assert (s["rows_in"], s["rows_out"], s["rows_in_error"]) == (10, 8, 2)
    assert s["step_rows"] == {"extract": {"in": 10, "out": 10}, "transform": {"in": 10, "out": 8, "error": 2},
                              "load": {"in": 8, "out": 8}}


EMPTY = """
name: daily
version: 1
steps:
  - id: fetch
    uses: pass
    timeout: 1s
    retry: {max: 3, strategy: fixed, base: 1ms}
    output: {count: 0}
    rows: {in: "result.count"}
    expect: "rows.in > 0"
  - id: publish
    uses: pass
    timeout: 1s
"""


def test_an_expectation_on_empty_data_fails_the_step_once_and_keeps_its_counts(store, clock, aio):
    run_id = aio(publish_and_run(store, compiled(EMPTY), input={}))
    aio(engine(store, PassConnector(), clock=clock).drive())
    run = aio(run_row(store, run_id))
    assert (run["state"], run["failed_step"], run["error_code"]) == ("failed", "fetch", "E_EXPECTATION_FAILED")
    assert "rows.in > 0" in run["error_message"] and "rows.in = 0" in run["error_message"]
    # not retried (the data will not change by asking again), and nothing after it ran
    assert aio(attempts(store, run_id)) == [("fetch", "action", 1, "failed", "E_EXPECTATION_FAILED")]
    assert run["summary"]["rows_in"] == 0 and run["summary"]["step_rows"] == {"fetch": {"in": 0}}


def test_a_workflow_expectation_over_the_result_fails_the_run(store, clock, aio):
    text = """
name: fresh
version: 1
expect: ["rows.out >= 1", "result.load.max_date >= input.day"]
steps:
  - id: load
    uses: pass
    timeout: 1s
    output: {max_date: "2026-07-03", n: 5}
    rows: {out: "result.n"}
"""
    ir = compiled(text)
    stale = aio(publish_and_run(store, ir, input={"day": "2026-07-04"}, key="stale"))
    fresh = aio(publish_and_run(store, ir, input={"day": "2026-07-03"}, key="fresh"))
    aio(engine(store, PassConnector(), clock=clock).drive())
    run = aio(run_row(store, stale))
    assert (run["state"], run["error_code"], run["failed_step"]) == ("failed", "E_EXPECTATION_FAILED", None)
    assert "result.load.max_date = '2026-07-03'" in run["error_message"]
    assert "input.day = '2026-07-04'" in run["error_message"]
    assert aio(run_row(store, fresh))["state"] == "succeeded"


def test_counts_recorded_before_a_takeover_are_in_the_summary(store, clock, aio):
    """The first worker measures `extract` and `transform`, then the run sleeps; the worker that takes it over
    measured neither and still reports their rows (read back from step_rows)."""
    text = ETL.replace("  - id: load\n", "  - id: pause\n    sleep: 60s\n  - id: load\n")
    run_id = aio(publish_and_run(store, compiled(text), input={"n": 10}))
    assert aio(engine(store, PassConnector(), clock=clock).drive()) == {run_id: "sleeping"}
    clock.advance(61)
    assert aio(engine(store, PassConnector(), clock=clock, worker_id="w2").drive()) == {run_id: "succeeded"}
    summary = aio(run_row(store, run_id))["summary"]
    assert (summary["rows_in"], summary["rows_out"], summary["rows_in_error"]) == (10, 8, 2)
    assert summary["step_rows"]["transform"] == {"in": 10, "out": 8, "error": 2}


COUNTED = """
name: counted
version: 1
expect: [EXPECT]
steps:
  - id: load
    uses: pass
    timeout: 1s
    retry: {max: 3, strategy: fixed, base: 1ms}
    output: {n: "{{ input.n }}", bad: -1}
    rows: {in: ROWS}
"""


@pytest.mark.parametrize("rows_in, says", [
    ('"result.missing"', "rows.in of step load (result.missing) failed"),
    ('"int(result.n) / 0"', "rows.in of step load (int(result.n) / 0) failed"),
    ('"result.bad"', "rows of step load"),
])
def test_a_count_that_does_not_evaluate_to_a_count_fails_the_step_for_good(store, clock, aio, rows_in, says):
    ir = compiled(COUNTED.replace("ROWS", rows_in).replace("EXPECT", '"rows.in >= 0"'))
    run_id = aio(publish_and_run(store, ir, input={"n": 5}))
    assert aio(engine(store, PassConnector(), clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["failed_step"], run["error_code"]) == ("load", "E_EXPR_EVAL") and says in run["error_message"]
    assert aio(attempts(store, run_id)) == [("load", "action", 1, "failed", "E_EXPR_EVAL")]    # not retried


def test_a_workflow_expectation_that_fails_to_evaluate_fails_the_run(store, clock, aio):
    ir = compiled(COUNTED.replace("ROWS", '"int(result.n)"').replace("EXPECT", '"result.load.n / 0 > 1"'))
    run_id = aio(publish_and_run(store, ir, input={"n": 5}))
    assert aio(engine(store, PassConnector(), clock=clock).drive()) == {run_id: "failed"}
    run = aio(run_row(store, run_id))
    assert (run["failed_step"], run["error_code"]) == (None, "E_EXPR_EVAL")
    assert "expect of workflow counted (result.load.n / 0 > 1) failed" in run["error_message"]
    assert run["summary"]["rows_in"] == 5
