"""`step.map(..., key=)` in a code workflow (docs/partitions.md "Fan-out over items"): items keyed by a field, `fn`
gets the whole item, the item's step is `name[key]`; keys that cannot name items stop the run before any item
runs, naming the item's index."""

from __future__ import annotations

import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.sdk.map_items import map_keys
from tests.partitions.support import ThreadedDailyApi
from tests.runtime.engine_support import engine

MODULE = '''
import json
import urllib.request

from anthares44.automation import step, workflow


def bill(base, inv, key):
    req = urllib.request.Request(f"{base}/day/{inv['id']}?amount={inv['amount']}", headers={"Idempotency-Key": key})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())["day"]


@workflow("bill-code", version=1)
async def bill_all(ctx, input):
    got = await step.map("bill", input["invoices"], lambda inv: bill(input["baseUrl"], inv, ctx.idempotency_key),
                         key=KEY, concurrency=8, timeout="5s")
    return {"billed": got}
'''


def test_map_items_keyed_by_a_field_get_the_whole_item(store, clock, aio, tmp_path):
    api = ThreadedDailyApi()
    (tmp_path / "bill_code.py").write_text(MODULE.replace("KEY", '"id"'))
    invoices = [{"id": f"inv-{i:03d}", "amount": i} for i in range(200)]

    async def body():
        auto = Automation(store)
        assert (await auto.publish([str(tmp_path / "bill_code.py")])).ok
        run_id = (await auto.run("bill-code", {"baseUrl": api.url, "invoices": invoices}, "k1")).run_id
        eng = engine(store, clock=clock)
        await eng.drive()
        run = await store.get_run(run_id)
        assert run["state"] == "succeeded", (run["state"], run["error_message"])
        assert run["result"] == {"billed": [i["id"] for i in invoices]}
        steps = {a["step_id"] for a in await store.list_attempts(run_id) if a["step_id"].startswith("bill[")}
        assert steps == {f"bill[{i['id']}]" for i in invoices}
        await eng.registry.aclose()
    try:
        aio(body())
    finally:
        api.close()
    assert dict(api.calls) == {i["id"]: 1 for i in invoices}


@pytest.mark.parametrize("items, key, says", [
    ([{"id": "a"}, {"id": "a"}], "id", "items 0 and 1 have the same key 'a'"),
    ([{"id": "a"}, {"id": None}], "id", "item 1 has a null key"),
    ([{"id": "a"}, {"id": 2}], "id", "the key of item 1 is int, not a string"),
    ([{"id": "a"}, "b"], "id", "item 1 is str, not an object with field 'id'"),
    ([{"id": str(i)} for i in range(100_001)], "id", "100001 items (at most 100,000)"),
])
def test_map_keys_that_cannot_name_items_are_refused_naming_the_item(items, key, says):
    with pytest.raises(ValueError) as bad:
        map_keys("bill", items, key)
    assert says in str(bad.value)


def test_map_keys_by_a_function_and_without_key():
    assert map_keys("bill", [{"n": 1}, {"n": 2}], lambda it: f"n{it['n']}") == ["n1", "n2"]
    assert map_keys("days", ["2026-07-01", {"a": 1}], None) == ["2026-07-01", '{"a": 1}']
    assert len(map_keys("bill", [{"id": str(i)} for i in range(100_000)], "id")) == 100_000
