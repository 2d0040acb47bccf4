"""Debounce (§22): a burst of events per key becomes one run, started once the key is quiet (or maxWait after its
first event), carrying the events as `deliver` says."""

from __future__ import annotations

import json
import random
from datetime import timedelta

from .support import buffers, debounce_wf, rows, runs_of, send


def _input(run: dict):
    v = run["input"]
    return json.loads(v) if isinstance(v, str) else v


def test_a_burst_of_one_key_is_one_run_started_after_quiet(a44_env):
    env = a44_env
    env.publish(debounce_wf(quiet="2s", deliver="all"))
    for i in range(5):
        send(env, "doc.changed", {"docId": "d1", "n": i}, f"k{i}")
        env.advance("500ms")
    assert runs_of(env, "wf_doc_sync") == []
    env.advance("1s")            # 1.5 s after the last event: not yet quiet
    assert runs_of(env, "wf_doc_sync") == []
    env.advance("600ms")
    runs = runs_of(env, "wf_doc_sync")
    assert len(runs) == 1
    got = _input(runs[0])
    assert got["key"] == "d1" and [e["data"]["n"] for e in got["events"]] == [0, 1, 2, 3, 4]
    assert [b["flush_reason"] for b in buffers(env)] == ["quiet"]


SLOW = __import__("os").environ.get("A44_SLOW") == "1"


def test_1000_events_over_10s_shuffled_occurred_at_are_one_run_in_occurred_at_order(a44_env):
    """Issue 30's bar: 1,000 events of one key over 10 s, occurred_at shuffled by up to 500 ms, quiet 2 s,
    deliver all: exactly one run, receiving the 1,000 in occurred_at order."""
    env = a44_env
    env.publish(debounce_wf(quiet="2s", deliver="all"))
    rng = random.Random(30)
    t0 = env.now
    n = 1000
    for i in range(n):
        at = t0 + timedelta(milliseconds=10 * i)
        env.clock.set(at)
        occurred = at - timedelta(milliseconds=rng.randint(0, 500))
        send(env, "doc.changed", {"docId": "d1", "i": i}, f"evt-{i}", occurred_at=occurred)
    env.advance("1900ms")        # 1.9 s after the last event: still within quiet
    assert runs_of(env, "wf_doc_sync") == []
    env.advance("200ms")
    runs = runs_of(env, "wf_doc_sync")
    assert len(runs) == 1
    events = _input(runs[0])["events"]
    assert len(events) == n and len({e["id"] for e in events}) == n
    stamps = [e["occurred_at"] for e in events]
    assert stamps == sorted(stamps)
    assert sorted(e["data"]["i"] for e in events) == list(range(n))
    assert env.get(runs[0]["run_id"]).state == "succeeded"


def test_steady_traffic_starts_a_run_at_most_max_wait_plus_1s_after_the_first_event(a44_env):
    """An event every second, forever (quiet 2 s is never reached): each run starts at most maxWait + 1 s after
    the first event of its buffer, and every event is in exactly one run."""
    env = a44_env
    env.publish(debounce_wf(quiet="2s", max_wait="10s", deliver="all"))
    sent = []
    seconds = 300 if SLOW else 45
    for i in range(seconds):
        sent.append((f"evt-{i}", env.now))
        send(env, "doc.changed", {"docId": "d1", "i": i}, f"k-{i}")
        env.advance("1s")
    runs = runs_of(env, "wf_doc_sync")
    assert len(runs) >= seconds // 11
    received = dict(sent)
    carried = []
    for run in runs:
        events = _input(run)["events"]
        first = min(received[e["idempotency_key"].replace("k-", "evt-")] for e in events)
        assert run["created_at"] - first <= timedelta(seconds=11), (run["created_at"], first)
        carried += [e["data"]["i"] for e in events]
    open_ = [b for b in buffers(env) if b["state"] == "open"]
    held = sum(b["events"] for b in open_)
    assert sorted(carried) == list(range(len(carried))) and len(carried) + held == seconds
    assert {b["flush_reason"] for b in buffers(env) if b["state"] == "flushed"} == {"maxWait"}


def test_deliver_last_and_first_follow_occurred_at_not_arrival(a44_env):
    """Out-of-order occurred_at: the event that arrives first occurred last. `last` runs with its data, `first`
    with the other's; the run's event_id is the event it stands for."""
    env = a44_env
    env.publish(debounce_wf("doc-last", quiet="1s", deliver="last", event="doc.a"),
                debounce_wf("doc-first", quiet="1s", deliver="first", event="doc.a"))
    t = env.now
    late = send(env, "doc.a", {"docId": "d", "v": "late"}, "a1", occurred_at=t)
    early = send(env, "doc.a", {"docId": "d", "v": "early"}, "a2", occurred_at=t - timedelta(seconds=5))
    assert {d["outcome"] for d in late.deliveries + early.deliveries} == {"buffered"}
    env.advance("1s")
    (last,), (first,) = runs_of(env, "wf_doc_last"), runs_of(env, "wf_doc_first")
    assert _input(last) == {"docId": "d", "v": "late"} and last["event_id"] == late.event_id
    assert _input(first) == {"docId": "d", "v": "early"} and first["event_id"] == early.event_id


def test_each_key_has_its_own_buffer_and_run(a44_env):
    env = a44_env
    env.publish(debounce_wf(quiet="1s", deliver="all"))
    for i in range(6):
        send(env, "doc.changed", {"docId": f"d{i % 3}", "i": i}, f"k{i}")
    env.advance("1s")
    runs = runs_of(env, "wf_doc_sync")
    assert sorted(_input(r)["key"] for r in runs) == ["d0", "d1", "d2"]
    assert all(len(_input(r)["events"]) == 2 for r in runs)


def test_a_key_that_fails_or_is_null_sends_the_envelope_to_the_dlq_never_a_shared_bucket(a44_env):
    env = a44_env
    env.publish(debounce_wf(key="input.docId", quiet="1s"))
    missing = send(env, "doc.changed", {"other": 1}, "no-field")         # the field is absent: the key fails
    null = send(env, "doc.changed", {"docId": None}, "null-field")       # null
    listed = send(env, "doc.changed", {"docId": [1, 2]}, "list-field")   # not a scalar
    for got in (missing, null, listed):
        assert [d["outcome"] for d in got.deliveries] == ["dead_lettered"]
        assert got.deliveries[0]["dead_letter_id"].startswith("dlq_")
    letters = rows(env, "select error_code, event_id from automation.dead_letters order by created_at")
    assert [r["error_code"] for r in letters] == ["E_FLOW_KEY_INVALID"] * 3
    assert buffers(env) == []
    env.advance("1m")
    assert runs_of(env, "wf_doc_sync") == []


def test_a_repeated_event_id_is_carried_once_and_its_repeat_names_the_run(a44_env):
    env = a44_env
    env.publish(debounce_wf(quiet="1s", deliver="all"))
    first = send(env, "doc.changed", {"docId": "d"}, "same", event_id="evt_client_1")
    again = send(env, "doc.changed", {"docId": "d"}, "same", event_id="evt_client_1")
    assert first.created and not again.created
    assert again.deliveries == [{"trigger_id": first.deliveries[0]["trigger_id"], "outcome": "buffered",
                                 "run_id": None}]
    env.advance("1s")
    (run,) = runs_of(env, "wf_doc_sync")
    assert [e["id"] for e in _input(run)["events"]] == ["evt_client_1"]
    third = send(env, "doc.changed", {"docId": "d"}, "same", event_id="evt_client_1")
    assert third.deliveries[0]["run_id"] == run["run_id"]
    env.advance("1m")
    assert len(runs_of(env, "wf_doc_sync")) == 1


def test_an_envelope_delivered_to_the_workflow_joins_the_buffer_too(a44_env):
    """`deliver_envelope` (a raw envelope enqueued for the workflow) is an event of it: buffered like the bus's."""
    from anthares44.automation.runtime.queues import deliver_envelope

    env = a44_env
    env.publish(debounce_wf(quiet="1s", deliver="last"))
    for v in ("a", "b"):
        raw = json.dumps({"id": f"evt_{v}", "type": "doc.changed", "idempotency_key": f"env-{v}",
                          "occurred_at": env.now.isoformat(),
                          "data": {"docId": "d", "v": v}})
        got = env.call(deliver_envelope(env.store, env.project, "wf_doc_sync", raw))
        assert got["outcome"] == "buffered" and got["run_id"] is None
        again = env.call(deliver_envelope(env.store, env.project, "wf_doc_sync", raw))   # its key again
        assert again["outcome"] == "deduplicated" and again["buffer_id"] == got["buffer_id"]
    env.advance("1s")
    (run,) = runs_of(env, "wf_doc_sync")
    assert _input(run) == {"docId": "d", "v": "b"}
    assert buffers(env)[0]["events"] == 2
    raw = json.dumps({"id": "evt_c", "type": "doc.changed", "idempotency_key": "env-a",
                      "occurred_at": env.now.isoformat(), "data": {"docId": "d", "v": "c"}})
    late = env.call(deliver_envelope(env.store, env.project, "wf_doc_sync", raw))     # after the flush
    assert late["outcome"] == "deduplicated" and late["run_id"] == run["run_id"]
