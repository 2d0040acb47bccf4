"""The console's Partitions page over a run's items (docs/partitions.md "Fan-out over items"): 500 a time, a
"Next page" link carrying the cursor, the run's totals on each page."""

from __future__ import annotations

import html
import re

from tests.partitions.support import compile_yaml, drive_until_final, publish
from tests.partitions.test_items import invoices, items_yaml
from tests.runtime.engine_support import PROJECT, engine


def test_the_grid_of_a_runs_items_is_paged(pg_url, tmp_path):
    from anthares44.automation.clock import ManualClock
    from tests.console.conftest import make_token
    from tests.console.support import Client
    from tests.ingestion.support import LiveServer

    clock = ManualClock()
    live = LiveServer(pg_url, clock=clock, results_dir=tmp_path / "results")
    try:
        live.run(live.store.ensure_partitions())
        ir = compile_yaml(tmp_path, items_yaml("", uses="pass"))
        live.run(publish(live.store, ir))
        run_id = live.run(live.store.create_run(PROJECT, ir.workflow_id, {"invoices": invoices(1_200)}, "k1")).run_id
        eng = engine(live.store, clock=clock)
        assert live.run(drive_until_final(eng, clock, live.store, run_id))["state"] == "succeeded"
        live.run(eng.registry.aclose())
        c = Client(live.port)
        c.login(make_token(live))
        seen, path = [], f"/partitions?workflow={run_id}"
        while path:
            page = c.get(path)
            assert page.status == 200
            assert "1200 partitions, 0 failed for good; this page:" in page.text
            seen.append(re.findall(r'<th scope="row">(inv-\d+)</th>', page.text))
            nxt = re.search(r'<a rel="next" href="([^"]+)">Next page</a>', page.text)
            path = html.unescape(nxt.group(1)) if nxt else None
        assert [len(s) for s in seen] == [500, 500, 200]
        assert [k for s in seen for k in s] == [f"inv-{i:05d}" for i in range(1_200)]
    finally:
        live.close()
