"""Per-key concurrency at admission (§22, docs/flow.md "Admission"): the claim counts live holders of each key in
the statement that grants, parks what is over, and a slot goes with the lease."""

from __future__ import annotations

from anthares44.automation.runtime.engine import Engine
from tests.flow.flow_support import enqueue, holders, limited, publish


def test_a_key_never_holds_more_than_its_limit_and_other_keys_go_on(store, clock, aio):
    ir = limited("tenants", concurrency=[("input.tenant", 2, "workflow", False)])
    aio(publish(store, ir))
    aio(enqueue(store, ir, "a", 6))
    aio(enqueue(store, ir, "b", 2))
    eng = Engine(store, clock=clock, concurrency=16)
    rows = aio(eng.claim(16))
    assert len(rows) == 4
    assert aio(holders(store)) == {"c:wf_tenants#0=a": 2, "c:wf_tenants#0=b": 2}
    for r in rows:
        aio(eng.drive_run(r))
    assert aio(holders(store)) == {}
    rows = aio(eng.claim(16))
    assert aio(holders(store)) == {"c:wf_tenants#0=a": 2}
