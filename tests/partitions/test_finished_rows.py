"""What a finished run's row says (issue 25 item 8): a run that ended has no `current_step` (a `since` run showed
the last partition it started, `load[2026-07-03]`), and a `partial` run that a person completes by skipping its
last failed partition finished at the skip, not at the end of the visit that left it partial."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.runtime.engine.skips import skip
from tests.partitions.conftest import BAD, SLOW
from tests.partitions.support import DailyApi, compile_yaml, publish
from tests.partitions.test_since import Days, since_yaml
from tests.runtime.engine_support import PROJECT


def test_a_finished_since_run_has_no_current_step(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject = {"2026-07-02"}
    ir = compile_yaml(tmp_path, since_yaml(serve(api.app())))

    async def body():
        await publish(store, ir)
        days = Days(store, clock, ir)
        state, plan = await days.on(4)
        assert (state, plan) == ("partial", ["2026-07-01", "2026-07-02", "2026-07-03"])
        run = await store.get_run(days.run_id)
        assert (run["current_step"], run["failed_step"]) == (None, None), run["current_step"]
        api.reject = set()
        state, plan = await days.on(5)
        assert (state, plan) == ("succeeded", ["2026-07-02", "2026-07-04"])
        assert (await store.get_run(days.run_id))["current_step"] is None
        await days.eng.registry.aclose()
    aio(body())


def test_a_skip_that_completes_a_partial_run_is_when_it_finished(store, clock, aio, partial_run):
    _api, _eng, run_id = partial_run
    ended = aio(store.get_run(run_id))["finished_at"]
    clock.advance(timedelta(hours=3))
    aio(skip(store, PROJECT, run_id, partition=BAD, reason="upstream dropped that day", by="ana"))
    assert aio(store.get_run(run_id))["finished_at"] == ended          # still partial: unchanged
    clock.advance(timedelta(minutes=5))
    res = aio(skip(store, PROJECT, run_id, partition=SLOW, reason="re-exported by hand", by="bo"))
    run = aio(store.get_run(run_id))
    assert (res["state"], run["state"]) == ("succeeded", "succeeded")
    assert run["finished_at"] == clock.now() and run["updated_at"] == clock.now()
    assert run["current_step"] is None
