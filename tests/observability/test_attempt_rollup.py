"""Finished attempts reach the step metrics through deltas (migration 0012, docs/metrics.md): a finish appends one
row to `metric_attempt_deltas`, a fold moves the deltas into the `metric_attempts` rollup, and a scrape gives the
same figures before and after a fold. Folding twice or concurrently never counts an attempt twice."""

from __future__ import annotations

import asyncpg

from anthares44.automation.app.metrics import Flusher
from anthares44.automation.runtime.system_metrics import fold_attempts, read
from tests.runtime.pg import query

SETUP = [
    "insert into automation.workflow_versions values ('pj_default', 'wf_a', 1, 'x', '{}', now())",
    """insert into automation.runs (run_id, project_id, workflow_id, version, state, idempotency_key, deadline_at,
                                   created_at, updated_at)
       select 'run_' || g, 'pj_default', 'wf_a', 1, 'running', 'k' || g, now(), now(), now()
       from generate_series(1, 3) g""",
    # two attempts that start running and finish by an update, one inserted finished (a retry), one still running
    """insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at, project_id)
       values ('run_1', 'fetch', 1, 'k', 'running', now(), 'pj_default'),
              ('run_2', 'fetch', 1, 'k', 'running', now(), 'pj_default'),
              ('run_3', 'fetch', 1, 'k', 'running', now(), 'pj_default')""",
    """update automation.step_attempts set status = 'succeeded', finished_at = started_at + interval '20 ms'
       where run_id in ('run_1', 'run_2')""",
    """insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status, started_at, finished_at,
                                             project_id)
       values ('run_1', 'fetch', 2, 'k', 'failed', now(), now() + interval '3 s', 'pj_default')""",
]


def step_figures(aio, store) -> dict:
    v = aio(read(store))
    return {(a["workflow_id"], a["step_id"], a["status"]): (a["attempts"], a["retries"], round(a["seconds"], 3),
                                                             tuple(a["buckets"]))
            for a in v.attempts}


def counts(url: str) -> tuple[int, int]:
    return (query(url, "select count(*) from automation.metric_attempt_deltas")[0][0],
            query(url, "select coalesce(sum(attempts), 0) from automation.metric_attempts")[0][0])


def test_a_scrape_counts_the_same_before_and_after_a_fold(store, pg_url, aio):
    for sql in SETUP:
        query(pg_url, sql)
    assert counts(pg_url) == (3, 0)          # the finishes wrote deltas only; the running attempt none
    before = step_figures(aio, store)
    assert set(before) == {("wf_a", "fetch", "succeeded"), ("wf_a", "fetch", "failed")}
    assert before[("wf_a", "fetch", "succeeded")][:3] == (2, 0, 0.04)
    assert before[("wf_a", "fetch", "failed")][:3] == (1, 1, 3.0)

    assert aio(fold_attempts(store)) == 3
    assert counts(pg_url) == (0, 3)
    assert step_figures(aio, store) == before
    assert aio(fold_attempts(store)) == 0    # nothing left to move: nothing counted twice
    assert step_figures(aio, store) == before

    query(pg_url, "update automation.step_attempts set status = 'timeout', finished_at = now() where run_id = 'run_3'")
    assert aio(fold_attempts(store)) == 1
    after = step_figures(aio, store)
    assert after[("wf_a", "fetch", "timeout")][:2] == (1, 0)
    assert {k: v for k, v in after.items() if k[2] != "timeout"} == before


def test_a_fold_while_another_folds_moves_nothing_and_loses_nothing(store, pg_url, aio):
    for sql in SETUP:
        query(pg_url, sql)

    async def while_locked():
        other = await asyncpg.connect(pg_url)
        try:
            async with other.transaction():
                await other.execute("select pg_advisory_xact_lock(hashtext('a44.automation.metric_attempts.fold'))")
                return await fold_attempts(store)
        finally:
            await other.close()

    assert aio(while_locked()) is None       # the other folder holds the lock: this one does not queue behind it
    assert counts(pg_url) == (3, 0)
    assert aio(fold_attempts(store)) == 3
    assert counts(pg_url) == (0, 3)


def test_the_flusher_folds(store, pg_url, aio):
    for sql in SETUP:
        query(pg_url, sql)

    async def body():
        flusher = Flusher(store, interval=3600).start()
        await flusher.stop()                  # the final flush folds too

    aio(body())
    assert counts(pg_url) == (0, 3)


def test_a_partitions_attempts_count_under_their_step(store, pg_url, aio):
    for sql in SETUP[:2]:
        query(pg_url, sql)
    query(pg_url, """insert into automation.step_attempts (run_id, step_id, attempt, idempotency_key, status,
                                                           started_at, finished_at, project_id)
                     values ('run_1', 'fetch[2026-07-04]', 1, 'k', 'succeeded', now(), now(), 'pj_default'),
                            ('run_1', 'fetch[2026-07-05]', 1, 'k', 'failed', now(), now(), 'pj_default')""")
    assert set(step_figures(aio, store)) == {("wf_a", "fetch", "succeeded"), ("wf_a", "fetch", "failed")}
    aio(fold_attempts(store))
    assert set(step_figures(aio, store)) == {("wf_a", "fetch", "succeeded"), ("wf_a", "fetch", "failed")}
