"""Fan-out over partitions (docs/partitions.md) through the real compiler, interpreter, PostgreSQL and http
connector against a loopback server: one call per partition with its own key, bounded parallelism, results in
order, per-partition retries and timeouts, the `partial` run that lists what failed."""

from __future__ import annotations

from tests.partitions.support import DailyApi, compile_yaml, daily_yaml, days, partitions_of, start


def test_each_day_is_called_once_with_its_own_key_in_order_and_bounded(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    base = serve(api.app())
    ir = compile_yaml(tmp_path, daily_yaml(base, concurrency=3))

    async def body():
        eng, run_id, run = await start(store, clock, ir, "2026-07-01", "2026-07-10")
        assert run["state"] == "succeeded"
        assert api.calls == {d: 1 for d in days(10)}
        assert api.keys == {d: {f"{run_id}:load:{d}"} for d in days(10)}
        assert api.max_in_flight <= 3
        rows = await store.list_attempts(run_id)
        load = next(a for a in rows if a["step_id"] == "load")
        assert [r["json"]["day"] for r in store.load_result(load)] == days(10)   # results in partition order
        parts = await partitions_of(store, run_id)
        assert [(p["partition"], p["state"], p["attempts"]) for p in parts] == [(d, "success", 1) for d in days(10)]
        assert parts[0]["rows"] == {"in": 10, "out": 10, "error": 0}
        await eng.registry.aclose()
    aio(body())


def test_a_422_and_a_timeout_end_the_run_partial_listing_both(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject, api.hang = {"2026-07-04"}, {"2026-07-09"}
    base = serve(api.app())
    ir = compile_yaml(tmp_path, daily_yaml(base, concurrency=4, retries=1))

    async def body():
        eng, run_id, run = await start(store, clock, ir, "2026-07-01", "2026-07-10")
        assert run["state"] == "partial" and run["error_code"] == "E_PARTITIONS_FAILED"
        assert "load[2026-07-04] (E_UPSTREAM_422)" in run["error_message"]
        assert "load[2026-07-09] (E_STEP_TIMEOUT)" in run["error_message"]
        assert api.calls["2026-07-04"] == 1          # permanent: no retry
        assert api.calls["2026-07-09"] == 2          # timeout: retried once, then final
        parts = {p["partition"]: p for p in await partitions_of(store, run_id)}
        assert parts["2026-07-04"]["state"] == "failed" and parts["2026-07-09"]["state"] == "timeout"
        assert sum(p["state"] == "success" for p in parts.values()) == 8
        events = [e for e in await store.list_run_events(run_id) if e["kind"] == "run.partial"]
        assert {f["partition"] for f in events[0]["data"]["failed_partitions"]} == {"2026-07-04", "2026-07-09"}
        # the step after the fan-out ran: partial is acceptable to this workflow
        assert any(a["step_id"] == "report" and a["status"] == "succeeded" for a in await store.list_attempts(run_id))
        await eng.registry.aclose()
    aio(body())


def test_on_partition_failure_fail_fails_the_step(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject = {"2026-07-02"}
    base = serve(api.app())
    ir = compile_yaml(tmp_path, daily_yaml(base, on_failure="fail"))

    async def body():
        eng, run_id, run = await start(store, clock, ir, "2026-07-01", "2026-07-03")
        assert (run["state"], run["failed_step"], run["error_code"]) == ("failed", "load", "E_PARTITIONS_FAILED")
        assert not any(a["step_id"] == "report" for a in await store.list_attempts(run_id))
        await eng.registry.aclose()
    aio(body())


def test_a_run_that_ends_visits_after_its_fan_out_is_still_partial(store, clock, aio, serve, tmp_path):
    api = DailyApi()
    api.reject = {"2026-07-02"}
    base = serve(api.app())
    ir = compile_yaml(tmp_path, daily_yaml(base) + "  - id: cool-down\n    sleep: 5s\n")

    async def body():
        eng, run_id, run = await start(store, clock, ir, "2026-07-01", "2026-07-03")
        assert run["state"] == "partial" and "load[2026-07-02] (E_UPSTREAM_422)" in run["error_message"]
        states = [e["state"] for e in await store.list_run_events(run_id) if e["kind"] == "run.state"]
        assert "sleeping" in states                 # the run ended on a later visit than its fan-out
        await eng.registry.aclose()
    aio(body())
