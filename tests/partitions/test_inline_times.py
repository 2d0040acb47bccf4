"""A fan-out of steps without external effect (`pass`) runs thousands of partitions on the spot within one visit;
each partition records its own start and end, and the run ends when the last one did, not at the instant the
visit began (issue 25 item 8: 10,000 partitions recorded 0.02 s from start to end for 6 s of work). The engine's
clock ticks one millisecond per reading, so the work takes measurable time on it."""

from __future__ import annotations

from datetime import date, timedelta

from anthares44.automation.clock import ManualClock
from tests.partitions.support import PROJECT, compile_yaml, drive_until_final, publish
from tests.runtime.engine_support import engine

N = 10_000
YAML = """\
name: many-days
version: 1
steps:
  - id: fan
    uses: pass
    timeout: 1s
    partitions:
      range: {from: "input.from", to: "input.to", every: 1d}
      concurrency: 4
"""


class TickingClock(ManualClock):
    """Every reading moves time 1 ms on: work done between two readings takes time."""

    def now(self):
        return self.advance(timedelta(milliseconds=1))


def test_a_pass_fan_out_records_when_each_partition_and_the_run_really_ended(store, aio, tmp_path):
    ir = compile_yaml(tmp_path, YAML)
    ticking = TickingClock()
    first = date(1990, 1, 1)
    last = first + timedelta(days=N - 1)

    async def body():
        await publish(store, ir)
        run_id = (await store.create_run(PROJECT, ir.workflow_id, {"from": first.isoformat(),
                                                                   "to": last.isoformat()}, "k1")).run_id
        run = await drive_until_final(engine(store, clock=ticking), ticking, store, run_id)
        assert run["state"] == "succeeded"
        parts = await store.fetch("partition_list", project=PROJECT, run_id=run_id, workflow=None, state=None,
                                  partition=None, step=None, limit=N)
        assert len(parts) == N
        starts = [p["started_at"] for p in parts]
        assert len(set(starts)) == N and starts == sorted(starts)       # each its own start, in order
        assert all(p["finished_at"] >= p["started_at"] for p in parts)
        ended = max(p["finished_at"] for p in parts)
        assert run["finished_at"] >= ended, (run["finished_at"], ended)
        assert (run["finished_at"] - run["started_at"]) >= timedelta(milliseconds=N)    # N partitions' work
    aio(body())
