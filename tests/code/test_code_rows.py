"""Row counts of code workflows (§16, docs/rows.md) on the in-process engine: `step.rows(...)` and a returned
`rows` mapping add up into the run's summary like YAML steps' (first in, last out, errors summed), they survive
the visit that measured them (a sleep in between: the second visit fast-forwards the bodies), and
`step.run(..., expect=...)` fails the run on empty data."""

from __future__ import annotations

from datetime import timedelta

from tests.code.support import published_code
from tests.runtime.engine_support import engine

ETL = '''from anthares44.automation import workflow, step


@workflow("code-etl", version=1)
async def etl(ctx, input):
    def extract():
        step.rows(in_=input["n"], out=input["n"])
        return list(range(input["n"]))

    items = await step.run("extract", extract, timeout="5s", expect="rows.in > 0")
    kept = await step.run("transform", lambda: {"kept": [i for i in items if i % 5],
                                                 "rows": {"in": len(items), "out": len([i for i in items if i % 5]),
                                                          "error": len([i for i in items if not i % 5])}},
                          timeout="5s")
    await step.sleep("settle", "10s")

    async def load():
        step.rows(in_=len(kept["kept"]), out=len(kept["kept"]))
        return {"written": len(kept["kept"])}

    return await step.run("load", load, timeout="5s")
'''


async def _run(store, tmp_path, n: int, key: str):
    auto = await published_code(store, tmp_path, "etl.py", ETL)
    return (await auto.run("code-etl", {"n": n}, key)).run_id


def test_code_steps_rows_add_up_once_and_survive_the_visit_that_measured_them(store, clock, aio, tmp_path):
    async def body():
        run_id = await _run(store, tmp_path, 10, "full")
        eng = engine(store, clock=clock)
        await eng.drive()
        assert (await store.get_run(run_id))["state"] == "sleeping"
        clock.advance(timedelta(seconds=11))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "succeeded", run
        s = run["summary"]
        assert (s["rows_in"], s["rows_out"], s["rows_in_error"]) == (10, 8, 2)
        assert s["step_rows"] == {"extract": {"in": 10, "out": 10}, "transform": {"in": 10, "out": 8, "error": 2},
                                  "load": {"in": 8, "out": 8}}
    aio(body())


def test_a_code_step_expectation_fails_the_run_on_empty_data(store, clock, aio, tmp_path):
    async def body():
        run_id = await _run(store, tmp_path, 0, "empty")
        await engine(store, clock=clock).drive()
        run = await store.get_run(run_id)
        assert (run["state"], run["failed_step"], run["error_code"]) == ("failed", "extract", "E_EXPECTATION_FAILED")
        assert "rows.in = 0" in run["error_message"]
        assert run["summary"]["rows_in"] == 0
    aio(body())
