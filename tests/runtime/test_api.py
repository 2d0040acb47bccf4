"""The Python API (`anthares44.automation.api.Automation`) on real PostgreSQL: publish (§3.8), run with its
idempotency window (§8.2, §8.5), wait, runs filters, logs and follow (LISTEN/NOTIFY)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import pytest

from anthares44.automation.api import Automation, InvalidArgument
from anthares44.automation.errors import (
    E_IDEMPOTENCY_KEY_REQUIRED,
    E_RUN_NOT_FOUND,
    E_TEMPLATE,
    E_VERSION_CONFLICT,
    E_VERSION_REGRESSION,
    E_WORKFLOW_NOT_FOUND,
    A44Error,
)

P = "pj_default"

WORKFLOW = """\
name: demo-pass
version: {version}
concurrency:
  max: 5
  partitionKey: "{{{{ input.customer }}}}"
steps:
  - id: first
    uses: pass
    timeout: 1s
    output: {{ hello: "{{{{ input.customer }}}}" }}
  - id: {second}
    uses: pass
    timeout: 1s
"""

OTHER = """\
name: other-flow
version: 2
steps:
  - id: only
    uses: pass
    timeout: 2s
"""


def write_workflow(directory: Path, version: int = 1, second: str = "second", name: str = "demo.yaml") -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(WORKFLOW.format(version=version, second=second))
    return str(path)


# --- stand-in for a worker: the tests own these writes, the interpreter owns the real ones --------------------
async def finish_run(store, run_id: str, state: str, *, failed_step: str | None = None,
                     error_code: str | None = None, error_message: str | None = None) -> None:
    """Move a run to a final state and log it, in one transaction, as the interpreter does."""
    now = store.clock.now()
    async with store.connection("test_finish_run") as conn, conn.transaction():
        await conn.execute("update automation.runs set state = $2, failed_step = $3, error_code = $4, "
                           "error_message = $5, finished_at = $6, updated_at = $6, next_wake_at = null "
                           "where run_id = $1", run_id, state, failed_step, error_code, error_message, now)
        await conn.execute("insert into automation.run_events (run_id, project_id, at, kind, state, step_id, "
                           "error_code) select run_id, project_id, $2, 'run.state', state, failed_step, error_code "
                           "from automation.runs where run_id = $1", run_id, now)


async def set_running(store, run_id: str, step: str) -> None:
    now = store.clock.now()
    async with store.connection("test_set_running") as conn, conn.transaction():
        await conn.execute("update automation.runs set state = 'running', current_step = $2, started_at = $3, "
                           "updated_at = $3 where run_id = $1", run_id, step, now)


async def attempt(store, run_id: str, step: str, n: int, status: str, error_code: str | None = None,
                  seconds: float = 0.12) -> None:
    ref = await store.record_attempt_start(run_id, step, n, project=P)
    await store.record_attempt_finish(ref, status, error_code=error_code,
                                      finished_at=ref.started_at + timedelta(seconds=seconds))


@pytest.fixture
def auto(store, aio):
    a = Automation(store, P)
    yield a
    aio(a.close())


# --- publish ---------------------------------------------------------------------------------------------------
def test_publish_created_then_identical_is_unchanged(auto, aio, tmp_path):
    path = write_workflow(tmp_path / "wf")
    first = aio(auto.publish([path]))
    assert first.ok and [(w.workflow_id, w.version, w.outcome) for w in first.workflows] == [
        ("wf_demo_pass", 1, "created")]
    again = aio(auto.publish([path]))
    assert again.ok and again.workflows[0].outcome == "unchanged"
    assert aio(auto.store.latest_version(P, "wf_demo_pass"))["version"] == 1


def test_same_version_with_other_steps_is_refused_with_the_store_message(auto, aio, tmp_path):
    aio(auto.publish([write_workflow(tmp_path / "a")]))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "other.yaml").write_text(OTHER)
    write_workflow(tmp_path / "b", second="renamed")
    changed = aio(auto.publish([str(tmp_path / "b")]))
    assert not changed.ok
    by_id = {w.workflow_id: w for w in changed.workflows}
    refused = by_id["wf_demo_pass"]
    assert refused.outcome == "refused" and refused.error.code == E_VERSION_CONFLICT
    assert "already published with different steps" in refused.error.message
    assert "increment `version:` (to 2)" in refused.error.hint
    assert by_id["wf_other_flow"].outcome == "created"  # one refusal does not block the others
    stored = aio(auto.store.get_version(P, "wf_demo_pass", 1))
    assert [n["id"] for n in stored["ir"]["nodes"]] == ["first", "second"]  # the published IR never changes


def test_lower_version_is_refused(auto, aio, tmp_path):
    aio(auto.publish([write_workflow(tmp_path / "a", version=3)]))
    lower = aio(auto.publish([write_workflow(tmp_path / "b", version=2, second="x")]))
    w = lower.workflows[0]
    assert (w.outcome, w.error.code) == ("refused", E_VERSION_REGRESSION)
    assert "lower than the published version 3" in w.error.message and "version: 4" in w.error.hint


def test_compile_errors_refuse_everything_and_report_all(auto, aio, tmp_path):
    good = write_workflow(tmp_path)
    (tmp_path / "bad1.yaml").write_text("name: bad-one\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n")
    (tmp_path / "bad2.yaml").write_text("name: bad-two\nversion: 1\nsteps:\n  - id: a\n    uses: http\n"
                                        "    timeout: 1s\n    url: 'https://x'\n  - id: a\n    uses: pass\n"
                                        "    timeout: 1s\n")
    report = aio(auto.publish([str(tmp_path)]))
    assert not report.ok and report.workflows == []
    assert {d.file for d in report.diagnostics if d.severity.value == "error"} == {
        str(tmp_path / "bad1.yaml"), str(tmp_path / "bad2.yaml")}
    with pytest.raises(A44Error) as exc:
        aio(auto.store.latest_version(P, "wf_demo_pass"))  # the valid file was not stored either
    assert exc.value.code == E_WORKFLOW_NOT_FOUND
    assert good in report.files


def test_a_run_in_flight_keeps_its_version_after_a_newer_publish(auto, aio, tmp_path):
    aio(auto.publish([write_workflow(tmp_path / "v1")]))
    old = aio(auto.run("wf_demo_pass", {"customer": "c1"}, "k-old"))
    report = aio(auto.publish([write_workflow(tmp_path / "v2", version=2, second="third")]))
    assert report.workflows[0].outcome == "created"
    assert aio(auto.get_run(old.run_id))["version"] == 1
    new = aio(auto.run("demo-pass", {"customer": "c1"}, "k-new"))
    assert (old.version, new.version) == (1, 2)


# --- run -------------------------------------------------------------------------------------------------------
@pytest.fixture
def published(auto, aio, tmp_path):
    aio(auto.publish([write_workflow(tmp_path / "wf")]))
    return "wf_demo_pass"


@pytest.mark.parametrize("key", [None, "", "   "])
def test_run_without_a_key_is_refused_and_says_why(auto, aio, published, key):
    with pytest.raises(A44Error) as exc:
        aio(auto.run(published, {"customer": "c"}, key))
    assert exc.value.code == E_IDEMPOTENCY_KEY_REQUIRED
    assert "duplicate" in exc.value.message and "--idempotency-key" in exc.value.hint
    assert aio(auto.runs()).total == 0


def test_same_key_within_24h_returns_the_original_and_creates_nothing(auto, aio, published, clock):
    first = aio(auto.run(published, {"customer": "c"}, "k1"))
    assert first.created and first.run_id.startswith("run_") and first.key_age_seconds == 0
    clock.advance(timedelta(seconds=0.4))
    again = aio(auto.run("demo-pass", {"customer": "other"}, "k1"))
    assert (again.run_id, again.created, again.key_age_seconds) == (first.run_id, False, pytest.approx(0.4))
    assert aio(auto.runs()).total == 1
    clock.advance(timedelta(hours=24))  # the window has passed: the key is recycled
    later = aio(auto.run(published, {"customer": "c"}, "k1"))
    assert later.created and later.run_id != first.run_id
    assert aio(auto.runs()).total == 2


def test_run_records_manual_trigger_queue_and_partition_key(auto, aio, published):
    h = aio(auto.run(published, {"customer": "cust_4471"}, "k"))
    run = aio(auto.get_run(h.run_id))
    assert (run["trigger_id"], run["queue"], run["partition_key"], run["state"]) == (
        "manual", "q_default", "cust_4471", "pending")
    assert run["input"] == {"customer": "cust_4471"}


def test_run_refused_when_the_partition_key_cannot_be_rendered(auto, aio, published):
    with pytest.raises(A44Error) as exc:
        aio(auto.run(published, {"nothing": 1}, "k"))
    assert exc.value.code == E_TEMPLATE and "partition key" in exc.value.message
    assert aio(auto.runs()).total == 0


def test_run_of_an_unpublished_workflow(auto, aio):
    with pytest.raises(A44Error) as exc:
        aio(auto.run("wf_nope", {}, "k"))
    assert exc.value.code == E_WORKFLOW_NOT_FOUND


def test_wait_returns_when_the_run_ends(auto, aio, published):
    async def scenario():
        h = await auto.run(published, {"customer": "c"}, "k")

        async def worker():
            await asyncio.sleep(0.3)
            await finish_run(auto.store, h.run_id, "failed", failed_step="first", error_code="E_UPSTREAM_503")

        task = asyncio.create_task(worker())
        t0 = time.monotonic()
        run, timed_out = await auto.wait(h.run_id, timeout=10)
        await task
        return run, timed_out, time.monotonic() - t0

    run, timed_out, took = aio(scenario())
    assert not timed_out and run["state"] == "failed" and run["failed_step"] == "first"
    assert run["error_code"] == "E_UPSTREAM_503"
    assert took < 3  # woken by NOTIFY, not by the 5 s safety re-check


def test_run_with_wait_times_out_and_reports_the_run_as_it_stands(auto, aio, published):
    t0 = time.monotonic()
    h = aio(auto.run(published, {"customer": "c"}, "k", wait=True, timeout="300ms"))
    assert h.timed_out and h.state == "pending" and time.monotonic() - t0 < 3


# --- runs ------------------------------------------------------------------------------------------------------
def test_runs_filters_and_total(auto, aio, published, clock, tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "other.yaml").write_text(OTHER)
    aio(auto.publish([str(tmp_path / "o")]))
    old = aio(auto.run(published, {"customer": "a"}, "old"))
    clock.advance(timedelta(hours=50))
    failed = aio(auto.run(published, {"customer": "b"}, "failed"))
    comp = aio(auto.run(published, {"customer": "c"}, "comp"))
    other = aio(auto.run("other-flow", {}, "other"))
    aio(attempt(auto.store, failed.run_id, "second", 1, "failed", "E_UPSTREAM_503"))
    aio(finish_run(auto.store, failed.run_id, "failed", failed_step="second", error_code="E_UPSTREAM_503"))
    aio(finish_run(auto.store, comp.run_id, "compensation_failed", failed_step="first",
                   error_code="E_COMPENSATION_FAILED"))

    assert aio(auto.runs()).total == 4
    page = aio(auto.runs(state="failed", step="second", since="48h"))
    assert page.total == 1 and page.runs[0]["run_id"] == failed.run_id
    assert page.runs[0]["error_code"] == "E_UPSTREAM_503" and page.runs[0]["duration_ms"] == 0
    assert [r["run_id"] for r in aio(auto.runs(state="compensation_failed")).runs] == [comp.run_id]
    assert {r["run_id"] for r in aio(auto.runs(workflow="wf_other_flow")).runs} == {other.run_id}
    assert aio(auto.runs(workflow="demo-pass")).total == 3
    assert aio(auto.runs(since=timedelta(hours=49))).total == 3  # `old` is 50 h old
    limited = aio(auto.runs(limit=1))
    assert limited.total == 4 and len(limited.runs) == 1
    assert old.run_id in {r["run_id"] for r in aio(auto.runs(since="3d")).runs}


def test_runs_rejects_unknown_state_with_did_you_mean(auto, aio):
    with pytest.raises(InvalidArgument) as exc:
        aio(auto.runs(state="compensation_faild"))
    assert "did you mean 'compensation_failed'" in exc.value.hint
    with pytest.raises(InvalidArgument):
        aio(auto.runs(since="48"))


def test_runs_are_scoped_to_the_project(store, aio, published, auto):
    aio(auto.run(published, {"customer": "c"}, "k"))
    other = Automation(store, "pj_other")
    try:
        assert aio(other.runs()).total == 0
        with pytest.raises(A44Error) as exc:
            aio(other.run(published, {"customer": "c"}, "k"))
        assert exc.value.code == E_WORKFLOW_NOT_FOUND
    finally:
        aio(other.close())


# --- logs and follow -------------------------------------------------------------------------------------------
def test_logs_lists_attempts_with_durations(auto, aio, published):
    h = aio(auto.run(published, {"customer": "c"}, "k"))
    aio(attempt(auto.store, h.run_id, "first", 1, "failed", "E_UPSTREAM_503", seconds=0.12))
    aio(attempt(auto.store, h.run_id, "first", 2, "succeeded", seconds=0.05))
    rows = aio(auto.logs(h.run_id))
    assert [(r["step_id"], r["attempt"], r["kind"], r["status"], r["error_code"], r["duration_ms"]) for r in rows] == [
        ("first", 1, "action", "failed", "E_UPSTREAM_503", 120), ("first", 2, "action", "succeeded", None, 50)]
    with pytest.raises(A44Error) as exc:
        aio(auto.logs("run_01J9XQ"))
    assert exc.value.code == E_RUN_NOT_FOUND


def test_follow_streams_new_attempts_via_notify_and_ends_with_the_run(auto, aio, published):
    async def scenario():
        h = await auto.run(published, {"customer": "c"}, "k")
        seen: list[tuple[str, float]] = []
        t0 = time.monotonic()

        async def writer():
            await asyncio.sleep(0.3)
            await set_running(auto.store, h.run_id, "first")
            await attempt(auto.store, h.run_id, "first", 1, "succeeded")
            await asyncio.sleep(0.3)
            await finish_run(auto.store, h.run_id, "succeeded")

        task = asyncio.create_task(writer())
        async for event in auto.follow(h.run_id):
            seen.append((event["kind"], time.monotonic() - t0))
        await task
        return seen

    seen = aio(scenario())
    assert [k for k, _ in seen] == ["run.created", "attempt.started", "attempt.finished", "run.state"]
    # the attempt arrived soon after it was written (NOTIFY), far below the 5 s safety re-check
    assert seen[1][1] < 2.5 and seen[-1][1] < 3.5


def test_follow_of_a_finished_run_prints_its_history_and_ends(auto, aio, published):
    h = aio(auto.run(published, {"customer": "c"}, "k"))
    aio(finish_run(auto.store, h.run_id, "cancelled"))

    async def collect():
        return [e async for e in auto.follow(h.run_id)]

    events = aio(collect())
    assert [e["kind"] for e in events] == ["run.created", "run.state"] and events[-1]["state"] == "cancelled"


# --- with the real interpreter ---------------------------------------------------------------------------------
def test_wait_with_the_real_engine(auto, aio, published):
    from anthares44.automation.runtime.engine import Engine

    async def scenario():
        engine = Engine(auto.store)
        h = await auto.run(published, {"customer": "cust_4471"}, "k")
        waiter = asyncio.create_task(auto.wait(h.run_id, timeout=30))
        await asyncio.sleep(0.05)
        await engine.drive()
        return h, await waiter

    h, (run, timed_out) = aio(scenario())
    assert not timed_out and run["state"] == "succeeded", run
    rows = aio(auto.logs(h.run_id))
    assert [(r["step_id"], r["status"]) for r in rows] == [("first", "succeeded"), ("second", "succeeded")]
    assert aio(auto.store.list_attempts(h.run_id))[0]["result"] == {"hello": "cust_4471"}
