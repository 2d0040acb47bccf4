"""`step.map` in a code workflow (docs/code-workflows.md): each item is a recorded step `name[key]`, so no visit
and no replay runs a succeeded item again; items that fail for good make the run `partial`; `replay
--failed-partitions` calls exactly the failed items again (the loopback server counts)."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from tests.partitions.support import ThreadedDailyApi
from tests.runtime.engine_support import engine

MODULE = '''
import json
import urllib.error
import urllib.request

from anthares44.automation import step, workflow
from anthares44.automation.errors import A44Error


def fetch(base, day, key):
    req = urllib.request.Request(f"{base}/day/{day}", headers={"Idempotency-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise A44Error(f"E_UPSTREAM_{exc.code}", f"{day}: HTTP {exc.code}") from None


@workflow("daily-code", version=1)
async def daily(ctx, input):
    got = await step.map("load-day", input["days"],
                         lambda day: fetch(input["baseUrl"], day, ctx.idempotency_key),
                         concurrency=3, timeout="5s", retry={"max": 2, "strategy": "fixed", "base": "10s"},
                         on_failure="partial")
    return {"loaded": [g["day"] for g in got if g]}
'''
DAYS = [f"2026-07-{d:02d}" for d in range(1, 9)]
BAD, FLAKY = "2026-07-03", "2026-07-06"


async def _first_visit(store, clock, api, tmp_path, key: str):
    """Publish the module, start a run over DAYS and drive it once (FLAKY then waits for its retry)."""
    auto = Automation(store)
    assert (await auto.publish([str(tmp_path / "daily_code.py")])).ok
    run_id = (await auto.run("daily-code", {"baseUrl": api.url, "days": DAYS}, key)).run_id
    eng = engine(store, clock=clock)
    await eng.drive()
    return auto, run_id, eng


def test_map_items_are_recorded_steps_never_run_twice(store, clock, aio, tmp_path):
    api = ThreadedDailyApi()
    api.reject, api.flaky = {BAD}, {FLAKY}
    (tmp_path / "daily_code.py").write_text(MODULE)

    async def body():
        auto, run_id, eng = await _first_visit(store, clock, api, tmp_path, "k1")
        assert (await store.get_run(run_id))["state"] == "waiting"          # FLAKY waits for its retry
        assert dict(api.calls) == {d: 1 for d in DAYS}
        clock.advance(timedelta(seconds=11))
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "partial" and run["error_code"] == "E_PARTITIONS_FAILED"
        assert f"load-day[{BAD}] (E_UPSTREAM_422)" in run["error_message"]
        # the visit after the wait re-ran the function from the top, but only FLAKY's item was called again
        assert dict(api.calls) == {**{d: 1 for d in DAYS}, FLAKY: 2}
        assert api.keys[FLAKY] == {f"{run_id}:load-day:{FLAKY}"}
        assert run["result"]["loaded"] == [d for d in DAYS if d != BAD]

        api.reject = set()
        dry = await replay(auto, [run_id], failed_partitions=True, dry_run=True)
        assert dry["perRun"]["replayed"] == [f"load-day[{BAD}]"]
        await replay(auto, [run_id], failed_partitions=True)
        await eng.drive()
        run = await store.get_run(run_id)
        assert (run["state"], run["epoch"]) == ("succeeded", 1)
        assert dict(api.calls) == {**{d: 1 for d in DAYS}, FLAKY: 2, BAD: 2}   # exactly the failed item again
        assert run["result"]["loaded"] == DAYS
        await eng.registry.aclose()
    try:
        aio(body())
    finally:
        api.close()


def test_map_items_are_listed_as_partitions_and_a_person_can_skip_one(store, clock, aio, tmp_path):
    api = ThreadedDailyApi()
    api.reject, api.flaky = {BAD}, {FLAKY}
    (tmp_path / "daily_code.py").write_text(MODULE)

    async def body():
        auto, run_id, eng = await _first_visit(store, clock, api, tmp_path, "k2")
        waiting = await auto.partitions(run_id)
        assert waiting["counts"] == {"success": 6, "failed": 1, "retrying": 1}
        assert [p["partition"] for p in waiting["partitions"]] == DAYS          # in key order
        clock.advance(timedelta(seconds=11))
        await eng.drive()
        done = await auto.partitions(run_id, state="failed")
        assert [(p["step_id"], p["partition"], p["attempts"], p["error_code"]) for p in done["partitions"]] == [
            ("load-day", BAD, 1, "E_UPSTREAM_422")]
        assert (await auto.partitions(run_id))["counts"] == {"success": 7, "failed": 1}
        skipped = await auto.skip(run_id, partition=BAD, reason="the source dropped that day", by="ana")
        assert skipped["state"] == "succeeded"
        (row,) = (await auto.partitions("daily-code", partition=BAD))["partitions"]
        assert (row["state"], row["skipped_by"]) == ("skipped", "ana")
        await eng.registry.aclose()
    try:
        aio(body())
    finally:
        api.close()
