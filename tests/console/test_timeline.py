"""The run page's Gantt and DAG from attempt documents (pure functions): lease wait, retry waits between the
attempts of a step, compensation and epochs in lanes of their own; graph layers from the IR's edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from anthares44.automation.http.console.graph import layout, step_states
from anthares44.automation.http.console.timeline import lanes

T0 = datetime(2026, 7, 19, 14, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def attempt(step, n, start, end, status, kind="action", epoch=0, code=None):
    return {"step_id": step, "attempt": n, "started_at": at(start), "finished_at": at(end), "status": status,
            "kind": kind, "epoch": epoch, "error_code": code}


def test_lanes_show_the_lease_wait_retry_waits_sleeps_and_compensation():
    run = {"created_at": at(0), "finished_at": at(100)}
    attempts = [attempt("charge", 1, 10, 20, "failed", code="E_UPSTREAM_503"),
                attempt("charge", 2, 30, 40, "succeeded"),
                attempt("nap", 1, 40, 60, "succeeded"),
                attempt("charge", 1, 60, 70, "compensated", kind="compensation"),
                attempt("charge", 1, 80, 100, "succeeded", epoch=1)]
    out, span = lanes(run, attempts, {"nap"}, at(200))
    assert span == 100_000
    assert [(lane.title, [(b.kind, b.start_pct, b.width_pct) for b in lane.bars]) for lane in out] == [
        ("queued", [("lease_wait", 0.0, 10.0)]),
        ("charge", [("failed", 10.0, 10.0), ("retry_wait", 20.0, 10.0), ("succeeded", 30.0, 10.0)]),
        ("nap", [("sleep", 40.0, 20.0)]),
        ("charge (compensation)", [("compensation", 60.0, 10.0)]),
        ("charge · epoch 1", [("succeeded", 80.0, 20.0)])]
    assert "E_UPSTREAM_503" in out[1].bars[0].label


def test_a_running_attempt_reaches_now_and_the_graph_is_layered():
    run = {"created_at": at(0), "finished_at": None, "epoch": 0, "state": "running"}
    attempts = [attempt("a", 1, 1, 2, "succeeded"), {**attempt("b", 1, 2, 2, "running"), "finished_at": None}]
    out, span = lanes(run, attempts, set(), at(10))
    assert span == 10_000 and out[-1].bars[-1].width_pct == 80.0
    graph = {"nodes": [{"id": i, "index": n} for n, i in enumerate("abcd")],
             "edges": [["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"]]}
    nodes, edges, _, _ = layout(graph, step_states(attempts, run))
    ys = {n.id: n.y for n in nodes}
    assert ys["a"] < ys["b"] == ys["c"] < ys["d"] and len(edges) == 4
    assert {n.id: n.state for n in nodes} == {"a": "succeeded", "b": "running", "c": "not_started",
                                              "d": "not_started"}
