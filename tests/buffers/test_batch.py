"""Batch (§22): events per key gather into runs of at most `maxSize` events and `maxBytes` of envelopes; the event
that fills a batch starts its run at once, a batch not full starts `maxWait` after its first event."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .support import batch_wf, buffers, rows, runs_of, send

SLOW = os.environ.get("A44_SLOW") == "1"


def _events(run: dict) -> list[dict]:
    v = run["input"]
    return (json.loads(v) if isinstance(v, str) else v)["events"]


def test_the_filling_event_starts_the_run_and_the_rest_waits_max_wait(a44_env):
    env = a44_env
    env.publish(batch_wf(max_size=3, max_wait="5s"))
    for i in range(7):
        send(env, "order.placed", {"tenantId": "acme", "i": i}, f"o{i}")
    assert [len(_events(r)) for r in runs_of(env, "wf_tenant_batch")] == [3, 3]   # no clock moved
    env.advance("4900ms")
    assert len(runs_of(env, "wf_tenant_batch")) == 2
    env.advance("100ms")
    runs = runs_of(env, "wf_tenant_batch")
    assert [[e["data"]["i"] for e in _events(r)] for r in runs] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b["flush_reason"] for b in buffers(env)] == ["maxSize", "maxSize", "maxWait"]
    assert runs[0]["trigger_id"] is not None and runs[0]["event_id"] is None


def test_max_bytes_closes_the_batch_before_the_event_that_would_pass_it(a44_env):
    env = a44_env
    env.publish(batch_wf(max_size=100, max_wait="5s", max_bytes="1KB"))
    for i in range(5):
        send(env, "order.placed", {"tenantId": "acme", "i": i, "pad": "x" * 300}, f"o{i}")
    env.advance("5s")
    batches = buffers(env)
    assert all(b["bytes"] <= 1024 for b in batches) and sum(b["events"] for b in batches) == 5
    assert [b["flush_reason"] for b in batches][:2] == ["maxBytes", "maxBytes"]
    assert sorted(e["data"]["i"] for r in runs_of(env, "wf_tenant_batch") for e in _events(r)) == list(range(5))


def test_an_envelope_bigger_than_max_bytes_is_a_batch_of_one_never_refused(a44_env):
    env = a44_env
    env.publish(batch_wf(max_size=100, max_wait="5s", max_bytes="1KB"))
    send(env, "order.placed", {"tenantId": "acme", "pad": "y" * 2000}, "big")
    (run,) = runs_of(env, "wf_tenant_batch")
    assert len(_events(run)) == 1 and buffers(env)[0]["flush_reason"] == "maxBytes"


# an arrival pattern: bursts of (key index, events, pause in ms after the burst); within a burst events come at
# one instant, so bursts of one key add up past maxSize unless the filling event flushes
BURSTS = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 150), st.sampled_from([0, 0, 1, 10, 500, 4999, 5000])),
                  min_size=1, max_size=8 if SLOW else 5)


@settings(max_examples=40 if SLOW else 8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(pattern=BURSTS)
@example(pattern=[(0, 101, 0)])
@example(pattern=[(0, 60, 10), (1, 30, 0), (0, 41, 4999), (0, 5, 0)])
def test_a_batch_of_max_size_100_never_holds_101_and_every_event_is_in_exactly_one_run(a44_env, pattern):
    """Property over random arrival patterns of 3 keys (bursts and pauses around maxWait): no buffer ever holds
    more than maxSize (checked after every event: the filling event flushes inline), and once maxWait has passed
    every event is in exactly one run, of its own key."""
    env = a44_env
    wf = f"prop-{env._rng.getrandbits(32):08x}"
    wid = "wf_" + wf.replace("-", "_")
    env.publish(batch_wf(wf, max_size=100, max_wait="5s", event=f"ev.{wid}"))
    n = 0
    for k, count, pause in pattern:
        for _ in range(count):
            send(env, f"ev.{wid}", {"tenantId": f"t{k}", "n": n}, f"{wid}-{n}")
            n += 1
            over = rows(env, "select max(events) as m from automation.flow_buffers where workflow_id = $1", wid)
            assert over[0]["m"] <= 100
        if pause:
            env.advance(f"{pause}ms")
    env.advance("5s")
    runs = runs_of(env, wid)
    seen = [(e["data"]["tenantId"], e["data"]["n"]) for r in runs for e in _events(r)]
    assert sorted(i for _, i in seen) == list(range(n))
    assert all(len(_events(r)) <= 100 for r in runs)
    assert all(len({e["data"]["tenantId"] for e in _events(r)}) == 1 for r in runs)
    assert all(b["state"] == "flushed" for b in buffers(env) if b["workflow_id"] == wid)
