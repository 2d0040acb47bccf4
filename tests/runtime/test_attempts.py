"""§7.4 step attempts: the manual's query, the 256 KB result rule, monthly partitions."""

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from anthares44.automation.errors import E_DB, A44Error
from anthares44.automation.runtime.store.results import MAX_INLINE_BYTES

P = "pj_default"
MANUAL_QUERY = """select step_id, attempt, status, error_code, finished_at - started_at as duration
from automation.step_attempts where run_id = 'run_01J9XQ' order by attempt asc, started_at asc;"""


@pytest.fixture
def run_id(store, aio):
    aio(store.publish_version(P, "wf_a", 1, "a" * 64, {}))
    return aio(store.create_run(P, "wf_a", {}, "k")).run_id


async def _query(url, text):
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(text)
    finally:
        await conn.close()


def test_the_manuals_query_runs_as_written(store, run_id, aio, clock, pg_url):
    ref1 = aio(store.record_attempt_start(run_id, "reserve-funds", 1, project=P))
    clock.advance(timedelta(milliseconds=1500))
    aio(store.record_attempt_finish(ref1, "failed", error_code="E_UPSTREAM_503", error_message="503 from payments"))
    clock.advance(2)
    ref2 = aio(store.record_attempt_start(run_id, "reserve-funds", 2, project=P))
    clock.advance(0.25)
    aio(store.record_attempt_finish(ref2, "succeeded", result={"authId": "au_1"}))

    assert aio(_query(pg_url, MANUAL_QUERY)) == []  # literally as in the manual: that run does not exist here
    rows = aio(_query(pg_url, MANUAL_QUERY.replace("run_01J9XQ", run_id)))
    assert [tuple(r) for r in rows] == [
        ("reserve-funds", 1, "failed", "E_UPSTREAM_503", timedelta(seconds=1.5)),
        ("reserve-funds", 2, "succeeded", None, timedelta(seconds=0.25)),
    ]
    attempts = aio(store.list_attempts(run_id))
    assert attempts[0]["idempotency_key"] == f"{run_id}:reserve-funds"  # §2
    assert attempts[1]["result"] == {"authId": "au_1"} and attempts[1]["result_ref"] is None
    kinds = [(e["kind"], e["status"]) for e in aio(store.list_run_events(run_id))]
    assert kinds == [("run.created", None), ("attempt.started", "running"), ("attempt.finished", "failed"),
                     ("attempt.started", "running"), ("attempt.finished", "succeeded")]


def test_finishing_an_attempt_twice_is_refused(store, run_id, aio):
    ref = aio(store.record_attempt_start(run_id, "s", 1, project=P))
    aio(store.record_attempt_finish(ref, "lease_expired", error_code="E_LEASE_EXPIRED"))
    with pytest.raises(A44Error) as exc:
        aio(store.record_attempt_finish(ref, "succeeded", result={"late": True}))  # a zombie worker
    assert exc.value.code == E_DB
    assert aio(store.list_attempts(run_id))[0]["status"] == "lease_expired"
    with pytest.raises(ValueError):
        aio(store.record_attempt_finish(ref, "running"))


def test_result_over_256kb_goes_to_the_object_store(store, run_id, aio, tmp_path):
    small = {"blob": "x" * (MAX_INLINE_BYTES - len('{"blob":""}'))}  # exactly 256 KB serialised: still inline
    big = {"blob": "y" * MAX_INLINE_BYTES}
    r1 = aio(store.record_attempt_start(run_id, "small", 1, project=P))
    out1 = aio(store.record_attempt_finish(r1, "succeeded", result=small))
    assert out1["result_ref"] is None and out1["result_bytes"] == MAX_INLINE_BYTES
    r2 = aio(store.record_attempt_start(run_id, "big", 1, project=P))
    out2 = aio(store.record_attempt_finish(r2, "succeeded", result=big))
    assert out2["result_ref"] == f"a44-storage://{P}/_results/{run_id}/big/e0-action-a1.json"
    assert (tmp_path / "results" / P / "objects" / "_results" / run_id / "big" / "e0-action-a1.json").is_file()
    row = {a["step_id"]: a for a in aio(store.list_attempts(run_id))}
    assert row["big"]["result"] is None and row["big"]["result_ref"] == out2["result_ref"]
    assert row["big"]["result_bytes"] > MAX_INLINE_BYTES
    assert store.load_result(row["big"]) == big
    assert store.load_result(row["small"]) == small


def test_partitions_exist_for_this_month_and_next(store, aio, clock):
    names = {p["name"] for p in aio(store.list_partitions())}
    this, nxt = clock.now(), (clock.now().replace(day=1) + timedelta(days=32))
    assert f"step_attempts_y{this:%Y}m{this:%m}" in names
    assert f"step_attempts_y{nxt:%Y}m{nxt:%m}" in names
    assert "step_attempts_default" in names


def test_an_attempt_far_ahead_lands_and_moves_to_its_partition(store, run_id, aio, clock, pg_url):
    far = datetime(2031, 3, 14, 9, 26, tzinfo=UTC)
    ref = aio(store.record_attempt_start(run_id, "later", 1, project=P, started_at=far))
    aio(store.record_attempt_finish(ref, "succeeded", finished_at=far + timedelta(seconds=1)))
    where = "select tableoid::regclass::text as part from automation.step_attempts where step_id = 'later'"
    assert aio(_query(pg_url, where))[0]["part"] == "automation.step_attempts_default"
    clock.set(far)
    assert aio(store.ensure_partitions()) == 3  # 2031-03, -04, -05; the row moves out of the default partition
    assert aio(_query(pg_url, where))[0]["part"] == "automation.step_attempts_y2031m03"
    assert aio(store.list_attempts(run_id))[0]["status"] == "succeeded"
    assert aio(store.ensure_partitions()) == 0  # idempotent
