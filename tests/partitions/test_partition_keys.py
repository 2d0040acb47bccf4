"""The keys a step's `partitions:` gives at run time (docs/partitions.md): what a `foreach` list or a `range` read
from the input becomes (a key per value, date-times in UTC), and what fails the step with E_PARTITIONS_INVALID
before any partition runs (not a list, a key twice, not an ISO date, more than 10,000 partitions)."""

from __future__ import annotations

import pytest

from tests.partitions.support import PROJECT, compile_yaml, drive_until_final, partitions_of, publish
from tests.runtime.engine_support import attempts, engine

FOREACH = 'foreach: "input.keys"'
RANGE = 'range: {from: "input.from", to: "input.to", every: EVERY}'


def _yaml(source: str) -> str:
    return f"""\
name: keyed
version: 1
steps:
  - id: load
    uses: pass
    timeout: 1s
    partitions:
      {source}
"""


async def _run(store, clock, tmp_path, source: str, input: dict):
    ir = compile_yaml(tmp_path, _yaml(source))
    await publish(store, ir)
    run_id = (await store.create_run(PROJECT, ir.workflow_id, input, "k1")).run_id
    run = await drive_until_final(engine(store, clock=clock), clock, store, run_id)
    return run_id, run


@pytest.mark.parametrize("source, input, keys", [
    (FOREACH, {"keys": [7, 2.5, True, None, {"b": 1, "a": [1]}, [1, "x"], "eu-1"]},
     ["7", "2.5", "true", "null", '{"a":[1],"b":1}', '[1,"x"]', "eu-1"]),
    (RANGE.replace("EVERY", "1h"), {"from": "2026-07-01T22:00:00", "to": "2026-07-02"},
     ["2026-07-01T22:00:00+00:00", "2026-07-01T23:00:00+00:00", "2026-07-02T00:00:00+00:00"]),
    (RANGE.replace("EVERY", "1d"), {"from": "2026-07-01", "to": "2026-07-03"}, ["2026-07-01", "2026-07-02",
                                                                              "2026-07-03"]),
])
def test_each_value_or_instant_becomes_one_partition_key(store, clock, aio, tmp_path, source, input, keys):
    async def body():
        run_id, run = await _run(store, clock, tmp_path, source, input)
        assert run["state"] == "succeeded"
        parts = await partitions_of(store, run_id)
        assert [p["partition"] for p in parts] == keys and {p["state"] for p in parts} == {"success"}
    aio(body())


@pytest.mark.parametrize("source, input, says", [
    (FOREACH, {"keys": "2026-07-01"}, "foreach of step load: gave str, not a list"),
    (FOREACH, {"keys": ["eu", "us", "eu"]}, "foreach of step load: items 0 and 2 have the same key 'eu'"),
    (FOREACH, {"keys": list(range(100_001))}, "foreach of step load: has 100001 items (at most 100,000)"),
    (RANGE.replace("EVERY", "1d"), {"from": 20260701, "to": "2026-07-03"},
     "range from of step load gave int, not an ISO date string"),
    (RANGE.replace("EVERY", "1d"), {"from": "2026-07-01", "to": "July 3rd"},
     "range to of step load is 'July 3rd', not an ISO date"),
    (RANGE.replace("EVERY", "1d"), {"from": "1990-01-01", "to": "2026-07-03"},
     "step load would have more than 10000 partitions"),
])
def test_keys_that_cannot_be_partitions_fail_the_step_before_any_runs(store, clock, aio, tmp_path, source, input,
                                                                      says):
    async def body():
        run_id, run = await _run(store, clock, tmp_path, source, input)
        assert (run["state"], run["failed_step"], run["error_code"]) == ("failed", "load", "E_PARTITIONS_INVALID")
        assert says in run["error_message"]
        assert await partitions_of(store, run_id) == []
        assert [a[3:] for a in await attempts(store, run_id)] == [("failed", "E_PARTITIONS_INVALID")]
    aio(body())
