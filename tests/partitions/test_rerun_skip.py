"""After a `partial` run: `replay --failed-partitions` is a new epoch of the same run that calls exactly the failed
partitions again (the loopback server counts), and a person's skip records who and why and completes the run."""

from __future__ import annotations

import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from anthares44.automation.errors import A44Error
from tests.partitions.conftest import BAD, SLOW
from tests.partitions.support import PROJECT, compile_yaml, drive_until_final, partitions_of, publish
from tests.runtime.engine_support import attempts, engine


def test_rerun_failed_partitions_calls_exactly_those_again(store, clock, aio, partial_run):
    api, eng, run_id = partial_run
    before = dict(api.calls)
    api.reject, api.hang = set(), set()            # the far side is fixed

    async def body():
        auto = Automation(store)
        dry = await replay(auto, [run_id], failed_partitions=True, dry_run=True)
        assert dry["perRun"]["replayed"] == ["load", "report"]
        assert sorted(s for s in dry["perRun"]["reused"] if s.startswith("load[")) == sorted(
            f"load[{d}]" for d in before if d not in (BAD, SLOW))
        doc = await replay(auto, [run_id], failed_partitions=True)
        assert doc["replayed"] == 1
        run = await drive_until_final(eng, clock, store, run_id)
        assert (run["state"], run["epoch"]) == ("succeeded", 1)
        again = {d: api.calls[d] - before.get(d, 0) for d in api.calls}
        assert {d: n for d, n in again.items() if n} == {BAD: 1, SLOW: 1}     # exactly the two failed days
        parts = await partitions_of(store, run_id)
        assert {p["state"] for p in parts} == {"success"} and {p["epoch"] for p in parts} == {1}
        # the step result holds every day in order: eight reused, two fresh
        load = [a for a in await store.list_attempts(run_id) if a["step_id"] == "load" and a["epoch"] == 1]
        assert [r["json"]["day"] for r in store.load_result(load[-1])] == [p["partition"] for p in parts]
    aio(body())


def test_a_person_skips_the_failed_partitions_and_the_run_completes(store, clock, aio, partial_run):
    _api, _eng, run_id = partial_run

    async def body():
        auto = Automation(store)
        with pytest.raises(A44Error) as no:
            await auto.skip(run_id, partition="2026-07-01", reason="looks fine", by="ana")
        assert no.value.code == "E_SKIP_NOT_ALLOWED"              # it succeeded: nothing to skip
        with pytest.raises(A44Error) as unknown:
            await auto.skip(run_id, partition="2031-01-01", reason="typo", by="ana")
        assert unknown.value.code == "E_UNKNOWN_PARTITION"
        res = await auto.skip(run_id, partition=BAD, reason="upstream dropped that day", by="ana")
        assert res["state"] == "partial"                           # SLOW still failed
        res = await auto.skip(run_id, partition=SLOW, reason="re-exported by hand", by="bo")
        assert res["state"] == "succeeded"
        page = await auto.partitions(run_id, state="skipped")
        assert [(p["partition"], p["skipped_by"], p["skip_reason"]) for p in page["partitions"]] == [
            (BAD, "ana", "upstream dropped that day"), (SLOW, "bo", "re-exported by hand")]
        events = [e for e in await store.list_run_events(run_id) if e["kind"] in ("partition.skipped", "run.state")]
        assert [(e["kind"], e["data"].get("by")) for e in events][-3:] == [
            ("partition.skipped", "ana"), ("partition.skipped", "bo"), ("run.state", "bo")]
        with pytest.raises(A44Error) as done:
            await auto.skip(run_id, partition=BAD, reason="again", by="ana")
        assert done.value.code == "E_SKIP_NOT_ALLOWED"             # the run is succeeded now
    aio(body())


FAILS_A_STEP = """\
name: checked
version: 1
steps:
  - id: check
    uses: pass
    timeout: 1s
    output: {n: 0}
    expect: ["result.n > 0"]
  - id: after
    uses: pass
    timeout: 1s
"""


def test_a_failed_runs_step_is_skipped_on_the_record_and_the_run_stays_failed(store, clock, aio, tmp_path):
    async def body():
        ir = compile_yaml(tmp_path, FAILS_A_STEP)
        await publish(store, ir)
        run_id = (await store.create_run(PROJECT, ir.workflow_id, {}, "k1")).run_id
        run = await drive_until_final(engine(store, clock=clock), clock, store, run_id)
        assert (run["state"], run["failed_step"]) == ("failed", "check")
        auto = Automation(store)
        for kw, code in (({"reason": " ", "step": "check"}, "E_PARAMS_INVALID"),      # a skip needs a why
                         ({"reason": "ok"}, "E_PARAMS_INVALID"),                      # and a what
                         ({"reason": "ok", "step": "after"}, "E_SKIP_NOT_ALLOWED")):  # never attempted
            with pytest.raises(A44Error) as refused:
                await auto.skip(run_id, by="ana", **kw)
            assert refused.value.code == code
        with pytest.raises(A44Error) as missing:
            await auto.skip("run_01KXXAYDNR0000000000000000", step="check", reason="ok", by="ana")
        assert missing.value.code == "E_RUN_NOT_FOUND"
        res = await auto.skip(run_id, step="check", reason="the count is checked elsewhere", by="ana")
        assert (res["state"], res["step_id"], res["partition"]) == ("failed", "check", None)
        (ev,) = [e for e in await store.list_run_events(run_id) if e["kind"] == "step.skipped"]
        assert ev["message"] == "ana skipped check: the count is checked elsewhere"
        assert (await attempts(store, run_id))[-1] == ("check", "action", 2, "skipped", None)
        assert (await store.get_run(run_id))["state"] == "failed"
    aio(body())
