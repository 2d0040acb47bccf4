"""The webhook fast path (docs/webhooks.md, "Performance"): the short-lived trigger/secret cache stays exact, and
group commit answers 202/200 correctly under concurrency while rejected requests write nothing."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

from anthares44.automation.runtime.ingestion import group_commit
from anthares44.automation.runtime.ingestion.triggers import new_secret, rotate_secret
from anthares44.automation.runtime.ingestion.webhook_cache import cache_for

from .support import P, request, signed_headers

PATH = f"/v1/{P}/trg_hook"


def _post(live, secret, body, key=None):
    return request(live.port, "POST", PATH, body, signed_headers(secret, body, key=key))


def _cached(live):
    return cache_for(live.store).get(P, "trg_hook")


async def _sql(store, text, *args):
    async with store.connection("test") as conn, conn.transaction():
        return await conn.execute(text, *args)


def test_cache_is_filled_and_rotation_invalidates_it(live, project):
    body = b'{"a": 1}'
    assert _post(live, project, body, "k1")[0] == 202
    assert _cached(live) is not None
    new = live.call(rotate_secret, P, "trg_hook")["secret"]
    assert _cached(live) is None          # dropped by rotate in this process
    assert _post(live, new, body, "k2")[0] == 202
    assert _post(live, project, body, "k3")[0] == 202   # the old one stays valid 48 h


def test_secret_added_by_another_process_works_at_once(live, project):
    """A secret inserted behind the cache's back (as `webhook rotate` in another process does): the signature
    misses the cached secrets, so the endpoint reads again before refusing."""
    assert _post(live, project, b'{"a": 1}', "warm")[0] == 202
    assert _cached(live) is not None
    other = new_secret()
    live.run(_sql(live.store, "insert into automation.webhook_secrets (secret_id, project_id, trigger_id, secret, "
                              "created_at) values ('whs_x', $1, 'trg_hook', $2, now())", P, other))
    assert _cached(live) is not None      # still cached: nothing in this process invalidated it
    s, d, _ = _post(live, other, b'{"a": 2}', "fresh")
    assert s == 202, d


def test_stale_cache_never_writes_for_a_deactivated_trigger_or_revoked_secret(live, project):
    assert _post(live, project, b'{"a": 1}', "warm")[0] == 202
    before = live.counts()
    # revoke the secret behind the cache's back: refused, nothing written
    live.run(_sql(live.store, "update automation.webhook_secrets set expires_at = now() - interval '1 second' "
                              "where secret = $1", project))
    assert _cached(live) is not None
    assert _post(live, project, b'{"a": 2}', "k-revoked")[0] == 401
    assert live.counts() == before
    # deactivate the trigger behind the cache's back (a new secret so the signature itself is fine): 404, nothing
    other = new_secret()
    live.run(_sql(live.store, "insert into automation.webhook_secrets (secret_id, project_id, trigger_id, secret, "
                              "created_at) values ('whs_y', $1, 'trg_hook', $2, now())", P, other))
    assert _post(live, other, b'{"a": 3}', "k-ok")[0] == 202
    before = live.counts()
    live.run(_sql(live.store, "update automation.triggers set active = false, updated_at = now() "
                              "where project_id = $1 and trigger_id = 'trg_hook'", P))
    assert _cached(live) is not None
    assert _post(live, other, b'{"a": 4}', "k-gone")[0] == 404
    assert live.counts() == before


def test_new_workflow_version_is_used_despite_the_cache(live, project):
    s, d, _ = _post(live, project, b'{"a": 1}', "v1")
    assert s == 202
    assert live.run(live.store.get_run(d["run_id"]))["version"] == 1
    # version 2 published by another process (this one's cache still says 1)
    live.run(_sql(live.store, "insert into automation.workflow_versions (project_id, workflow_id, version, sha256, "
                              "ir, published_at) select project_id, workflow_id, 2, sha256 || 'b', ir, now() "
                              "from automation.workflow_versions "
                              "where project_id = $1 and workflow_id = 'wf_hooked' and version = 1", P))
    assert _cached(live) is not None and _cached(live).version == 1
    s, d, _ = _post(live, project, b'{"a": 2}', "v2")
    assert s == 202
    assert live.run(live.store.get_run(d["run_id"]))["version"] == 2


def test_concurrent_requests_group_commit_dedupe_and_rejections(live, project):
    keys = [f"gc:{i % 10}" for i in range(60)]          # 10 keys, each sent 6 times at once
    bodies = [json.dumps({"i": i}).encode() for i in range(60)]
    before = live.counts()
    with ThreadPoolExecutor(30) as pool:
        good = list(pool.map(lambda i: _post(live, project, bodies[i], keys[i]), range(60)))
        bad = list(pool.map(lambda i: _post(live, "whsec_" + "0" * 64, bodies[i], f"bad:{i}"), range(20)))
    assert all(s == 401 for s, _, _ in bad)
    by_key: dict[str, list] = {}
    for k, (s, d, _) in zip(keys, good):
        by_key.setdefault(k, []).append((s, d["run_id"]))
    for k, answers in by_key.items():
        assert sorted(s for s, _ in answers) == [200] * 5 + [202], (k, answers)
        assert len({r for _, r in answers}) == 1, (k, answers)
    after = live.counts()
    assert after["runs"] - before["runs"] == 10 and after["events"] - before["events"] == 10
    assert after["idempotency_keys"] - before["idempotency_keys"] == 10


def test_group_committer_batches_and_isolates_a_failing_request(live, project):
    """Many submissions at once share batches; a statement that fails makes its batch retry one by one, so only
    the failing request fails."""

    async def scenario(store):
        from anthares44.automation.runtime.ingestion.webhooks import lookup

        target = await lookup(store, P, "trg_hook", fresh=True)
        c = group_commit.GroupCommitter(store)
        now = store.clock.now()
        from anthares44.automation.runtime.ingestion.ids import new_event_id
        from anthares44.automation.runtime.store.core import IDEMPOTENCY_WINDOW, RUN_WALL_CLOCK_LIMIT
        from anthares44.automation.runtime.ulid import new_run_id

        def args(i, input_json='{"x": 1}'):
            ev = new_event_id(now)
            return dict(project=P, workflow_id=target.workflow_id, version=target.version, run_id=new_run_id(now),
                        input=input_json, key=f"trg_hook:batch:{i}", trigger_id="trg_hook", partition_key=None,
                        queue=None, now=now, window=IDEMPOTENCY_WINDOW, deadline=now + RUN_WALL_CLOCK_LIMIT,
                        event_id=ev, event_type="webhook.trg_hook", event_key=f"batch:{i}",
                        trigger_stamp=target.updated_at, envelope="{}", secret=project, corr_hashes=[],
                        corr_values=[])

        rows = await asyncio.gather(*(c.submit(args(i)) for i in range(20)))
        assert all(r["created_run_id"] for r in rows)
        assert c.batches < c.statements == 20
        results = await asyncio.gather(*(c.submit(args(100 + i, "not json" if i == 3 else '{"x": 2}'))
                                         for i in range(8)), return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        assert len(failed) == 1 and c.fallbacks >= 1
        assert sum(1 for r in results if not isinstance(r, BaseException) and r["created_run_id"]) == 7

    live.call(scenario)
