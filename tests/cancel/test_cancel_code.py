"""Cancel of a workflow written in Python: a sleeping code run cancelled with `--compensate` is claimed again, its
recorded steps replay without effect, its sleep ends `cancelled`, and its completed step's compensation runs before
the run ends `cancelled` (the same saga and durable wait as a YAML run)."""

from __future__ import annotations

from datetime import timedelta

from tests.code.support import published_code
from tests.runtime.engine_support import attempts, engine, state_changes

NAPPING = '''from anthares44.automation import workflow, step


def undo_a():
    return {"undone": "A"}


@workflow("nap-then-work", version=1)
async def nap(ctx, input):
    await step.run("a", fn=lambda: {"id": "A"}, compensate=undo_a)
    await step.sleep("nap", "1h")
    await step.run("b", fn=lambda: {"id": "B"})
'''


def test_a_sleeping_code_run_cancelled_with_compensate_undoes_its_steps(store, clock, aio, tmp_path):
    async def body():
        auto = await published_code(store, tmp_path, "nap_then_work.py", NAPPING)
        run_id = (await auto.run("nap-then-work", {}, "c1")).run_id
        eng = engine(store, clock=clock)
        assert await eng.drive() == {run_id: "sleeping"}
        out = await auto.cancel(run_id, by="ana", reason="not needed", compensate=True)
        assert (out["outcome"], out["state"]) == ("requested", "sleeping")
        assert await eng.drive() == {run_id: "compensating"}
        clock.advance(timedelta(seconds=5))
        assert await eng.drive() == {run_id: "cancelled"}
        assert await attempts(store, run_id) == [("a", "action", 1, "succeeded", None),
                                                 ("nap", "action", 1, "cancelled", "E_RUN_CANCELLED"),
                                                 ("a", "compensation", 1, "compensated", None)]
        assert (await state_changes(store, run_id))[-2:] == [("running", "compensating"),
                                                             ("compensating", "cancelled")]
        assert (await store.get_run(run_id))["error_message"] == "cancelled by ana: not needed"

    aio(body())
