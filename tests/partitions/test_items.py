"""Fan-out over items (docs/partitions.md "Fan-out over items", SPEC §21), bounded for the default suite: 2,000
items keyed by `item.id` against a loopback aiohttp API that records what each call carried; keys refused at plan
time with nothing written; the 100,000 limit; re-running the failed items only; a run's partitions paged by
cursor; the "which failed" query on its partial index. The full 100,000-item run is behind A44_SLOW=1."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from aiohttp import web

from anthares44.automation.app.automation import Automation
from anthares44.automation.app.replay import replay
from anthares44.automation.cli.cmd_partitions import render_text
from anthares44.automation.compiler.ir import MAX_ITEMS
from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.engine.item_plan import check_list, item_keys
from anthares44.automation.runtime.store.vocabulary import load_queries
from tests.partitions.support import PROJECT, compile_yaml, drive_until_final, publish
from tests.runtime.engine_support import engine
from tests.runtime.pg import query

N = 2_000
SLOW = os.environ.get("A44_SLOW") == "1"


class Invoices:
    """POST /item/{id}: records per id the calls, their idempotency keys and the JSON body; ids in `reject`
    answer 422 (permanent)."""

    def __init__(self):
        self.calls: dict[str, int] = {}
        self.keys: dict[str, set[str]] = {}
        self.bodies: dict[str, dict] = {}
        self.reject: set[str] = set()
        self.in_flight = self.max_in_flight = 0

    def app(self) -> web.Application:
        async def item(request: web.Request):
            k = request.match_info["id"]
            self.calls[k] = self.calls.get(k, 0) + 1
            self.keys.setdefault(k, set()).add(request.headers.get("Idempotency-Key", ""))
            self.bodies[k] = await request.json()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(0.005)      # long enough for calls to overlap: concurrency is observable
                if k in self.reject:
                    return web.json_response({"error": "closed period"}, status=422)
                return web.json_response({"billed": k})
            finally:
                self.in_flight -= 1

        app = web.Application()
        app.router.add_post("/item/{id}", item)
        return app


def items_yaml(base: str, *, key: str = "item.id", uses: str = "http", concurrency: int = 64) -> str:
    call = (f'    url: "{base}/item/{{{{ item.id }}}}"\n    method: POST\n'
            f'    json: {{whole: "{{{{ item }}}}", name: "n={{{{ item.name }}}}", key: "{{{{ partition }}}}"}}\n'
            if uses == "http" else '    output: {whole: "{{ item }}"}\n')
    return f"""\
name: bill-items
version: 1
steps:
  - id: bill
    uses: {uses}
    timeout: 5s
{call}    partitions:
      foreach: "input.invoices"
      key: "{key}"
      concurrency: {concurrency}
    onPartitionFailure: partial
"""


def invoices(n: int) -> list[dict]:
    return [{"id": f"inv-{i:05d}", "name": f"Customer {i}", "amount": i % 97} for i in range(n)]


async def _run(store, clock, ir, payload, rounds: int = 20) -> tuple[str, dict]:
    await publish(store, ir)
    run_id = (await store.create_run(PROJECT, ir.workflow_id, {"invoices": payload}, f"k{time.monotonic_ns()}")).run_id
    eng = engine(store, clock=clock, concurrency=4)
    try:
        return run_id, await drive_until_final(eng, clock, store, run_id, rounds)
    finally:
        await eng.registry.aclose()


def _count(pg_url, table: str, run_id: str) -> int:
    return query(pg_url, f"select count(*) as n from automation.{table} where run_id = $1", run_id)[0]["n"]


def test_items_are_keyed_by_item_id_and_each_call_gets_its_whole_item(store, clock, aio, serve, tmp_path, pg_url):
    api = Invoices()
    ir = compile_yaml(tmp_path, items_yaml(serve(api.app())))
    payload = invoices(N)

    run_id, run = aio(_run(store, clock, ir, payload))
    assert run["state"] == "succeeded"
    ids = [inv["id"] for inv in payload]
    plan = query(pg_url, "select keys, item_count from automation.partition_plans where run_id = $1", run_id)
    assert [(p["keys"], p["item_count"]) for p in plan] == [(None, N)]   # no per-item entry in the plan row
    stored = query(pg_url, "select partition, item from automation.partition_items where run_id = $1 "
                           "order by ordinal", run_id)
    assert [(r["partition"], json.loads(r["item"])) for r in stored] == [(i["id"], i) for i in payload]

    async def body():
        assert sorted(api.calls) == ids and set(api.calls.values()) == {1}     # each item once, by its id
        assert all(api.bodies[i["id"]] == {"whole": i, "name": f"n={i['name']}", "key": i["id"]} for i in payload)
        assert all(api.keys[i] == {f"{run_id}:bill:{i}"} for i in ids)       # the idempotency key names the item
        assert 1 < api.max_in_flight <= 64
        parts = await Automation(store).partitions(run_id, limit=N)
        assert [p["partition"] for p in parts["partitions"]] == ids and parts["counts"] == {"success": N}
        # the step's result: every item's, in item order
        (last,) = [a for a in await store.list_attempts(run_id) if a["step_id"] == "bill"]
        assert [r["json"]["billed"] for r in store.load_result(last)] == ids
    aio(body())


@pytest.mark.parametrize("key, payload, says", [
    ("item.id", [{"id": "a"}, {"id": "b"}, {"id": "a"}], "items 0 and 2 have the same key 'a'"),
    ("item.id", [{"id": "a"}, {"id": None}], "item 1 has a null key (item.id)"),
    ("item.n", [{"n": "x"}, {"n": "y"}, {"n": 7}], "the key of item 2 is int 7, not a string (item.n)"),
    ("item.id", [{"id": "a"}, {"name": "no id"}], "key of item 1 (item.id) failed"),
    ("item.id", [{"id": "x" * 1001}], "the key of item 0 has 1001 characters (at most 1000)"),
    ("item.id", [{"id": f"i{i}"} for i in range(MAX_ITEMS + 1)], "has 100001 items (at most 100,000)"),
])
def test_keys_that_cannot_name_items_refuse_the_plan_with_nothing_written(store, clock, aio, tmp_path, pg_url,
                                                                         key, payload, says):
    ir = compile_yaml(tmp_path, items_yaml("", key=key, uses="pass"))

    run_id, run = aio(_run(store, clock, ir, payload))
    assert (run["state"], run["failed_step"], run["error_code"]) == ("failed", "bill", "E_PARTITIONS_INVALID")
    assert says in run["error_message"], run["error_message"]
    for table in ("partition_items", "run_partitions", "partition_plans"):
        assert _count(pg_url, table, run_id) == 0, table        # refused whole: no half-written plan
    assert query(pg_url, "select count(*) as n from automation.partition_locks")[0]["n"] == 0


def test_the_limit_is_100000_items(aio):
    """At plan time: 100,000 items with 100,000 distinct keys pass; one more is refused before any key is
    evaluated (the run-level refusal at 100,001 is the parametrized test above)."""
    from anthares44.automation.grammar import compile_expression, load_program

    prog = load_program(compile_expression("item.id", roots={"item", "input"}).program.to_ir())
    most = [{"id": f"i{i}"} for i in range(MAX_ITEMS)]
    keys = aio(item_keys(check_list(most, "bill"), prog, {}, "bill"))
    assert len(keys) == len(set(keys)) == 100_000
    with pytest.raises(A44Error) as too_many:
        check_list([*most, {"id": "one-more"}], "bill")
    assert too_many.value.code == "E_PARTITIONS_INVALID"


@pytest.fixture
def failed_items(store, clock, aio, serve, tmp_path):
    """A 2,000-item run that ended `partial`: every 100th invoice answered 422."""
    api = Invoices()
    payload = invoices(N)
    api.reject = {inv["id"] for inv in payload[::100]}
    ir = compile_yaml(tmp_path, items_yaml(serve(api.app())))
    run_id, run = aio(_run(store, clock, ir, payload))
    assert run["state"] == "partial"
    return api, ir, run_id


def test_rerun_of_the_failed_items_calls_exactly_those_again(store, clock, aio, pg_url, failed_items):
    api, ir, run_id = failed_items
    failed = set(api.reject)
    assert len(failed) == 20
    run = query(pg_url, "select error_message from automation.runs where run_id = $1", run_id)[0]
    assert run["error_message"].startswith("20 partition(s) failed after their retries: bill[inv-00000]")
    before = query(pg_url, "select partition, attempts, finished_at from automation.run_partitions "
                           "where run_id = $1 and state = 'success' order by ordinal", run_id)
    api.calls.clear()
    api.reject = set()

    async def body():
        await replay(Automation(store), [run_id], failed_partitions=True)
        eng = engine(store, clock=clock, concurrency=4)
        run = await drive_until_final(eng, clock, store, run_id)
        await eng.registry.aclose()
        assert (run["state"], run["epoch"]) == ("succeeded", 1)
    aio(body())
    assert api.calls == {k: 1 for k in failed}          # the far side sees exactly the failed items, once each
    after = query(pg_url, "select partition, attempts, finished_at from automation.run_partitions "
                          "where run_id = $1 and partition <> all($2::text[]) order by ordinal", run_id, list(failed))
    assert after == before                               # the 1,980 that succeeded: untouched (attempts, times)
    fresh = query(pg_url, "select step_id from automation.step_attempts where run_id = $1 and epoch = 1 "
                          "and kind = 'action' and worker_id <> 'reused' and step_id like 'bill[%'", run_id)
    assert sorted(r["step_id"][5:-1] for r in fresh) == sorted(failed)


def test_a_runs_partitions_page_by_cursor(store, aio, failed_items, pg_url):
    _api, _ir, run_id = failed_items
    auto = Automation(store)

    async def pages(**kw) -> list[dict]:
        seen, cursor = [], None
        while True:
            doc = await auto.partitions(run_id, cursor=cursor, **kw)
            assert (doc["total"], doc["failed"]) == (N, 20)
            seen.append(doc)
            cursor = doc["next"]
            if cursor is None:
                return seen

    every = aio(pages(limit=300))
    assert [len(d["partitions"]) for d in every] == [300] * 6 + [200]
    keys = [p["partition"] for d in every for p in d["partitions"]]
    assert keys == [f"inv-{i:05d}" for i in range(N)]             # plan order, none twice, none left out
    failed = aio(pages(limit=7, state="failed"))
    assert [p["partition"] for d in failed for p in d["partitions"]] == [f"inv-{i:05d}" for i in range(0, N, 100)]
    text = render_text(every[0])
    assert f"{N} partition(s) in all, 20 failed for good; this page: 300" in text
    assert text.rstrip().endswith(f"next page: --cursor {every[0]['next']}")
    with pytest.raises(A44Error) as bad:
        aio(auto.partitions(run_id, cursor="not-a-cursor"))
    assert bad.value.code == "E_INVALID_ARGUMENT"


def _plan(pg_url, name: str, **params) -> str:
    q = load_queries()[name]
    rows = query(pg_url, "explain (format text) " + q.sql, *[params[p] for p in q.params])
    return "\n".join(r["QUERY PLAN"] for r in rows)


def test_which_failed_is_read_from_the_partial_index_not_the_runs_rows(failed_items, pg_url):
    """EXPLAIN of "which failed" and of a page: index scans, never a sequential scan of run_partitions (its rows
    here: 2,000 of the run, plus ANALYZE so the planner knows)."""
    _api, _ir, run_id = failed_items
    query(pg_url, "analyze automation.run_partitions")
    common = dict(project=PROJECT, run_id=run_id, after_step=None, after_ordinal=None, partition=None, step=None,
                  limit=101)
    failed = _plan(pg_url, "partition_failed_page", state=None, **common)
    assert "run_partitions_failed_idx" in failed and "Seq Scan on run_partitions" not in failed, failed
    page = _plan(pg_url, "partition_page", state=None, **common)
    assert "Seq Scan on run_partitions" not in page, page
    totals = _plan(pg_url, "partition_totals_of_run", run_id=run_id)
    assert "run_partitions_failed_idx" in totals and "Seq Scan on run_partitions" not in totals, totals


@pytest.mark.skipif(not SLOW, reason="100,000 items: A44_SLOW=1")
def test_one_run_over_100000_pass_items(store, clock, aio, tmp_path, pg_url):
    ir = compile_yaml(tmp_path, items_yaml("", uses="pass"))
    payload = invoices(MAX_ITEMS)

    run_id, run = aio(_run(store, clock, ir, payload, rounds=50))
    assert run["state"] == "succeeded"
    assert _count(pg_url, "partition_items", run_id) == MAX_ITEMS
    states = query(pg_url, "select state, count(*) as n from automation.run_partitions where run_id = $1 "
                           "group by state", run_id)
    assert [(s["state"], s["n"]) for s in states] == [("success", MAX_ITEMS)]
    (last,) = [a for a in aio(store.list_attempts(run_id)) if a["step_id"] == "bill"]
    assert store.load_result(last) == {"items": MAX_ITEMS, "succeeded": MAX_ITEMS, "skipped": 0, "failed": 0}
