"""The console's run page says why a run is queued (§22, as `runs explain`): a run parked behind a full key shows
the limit, its use `1/1`, FULL and the holder (linked); a run that nothing holds back shows no such section."""

from __future__ import annotations

from anthares44.automation.runtime.engine import Engine
from tests.console.conftest import live, writer  # noqa: F401 - the fixtures
from tests.flow.flow_support import enqueue, limited, publish


def test_the_run_page_of_a_run_held_back_by_a_full_key_says_why(live, writer):
    ir = limited("console-why", concurrency=[("input.tenant", 1, "workflow", False)])
    live.run(publish(live.store, ir))
    first, second = live.run(enqueue(live.store, ir, "acme", 2))
    eng = Engine(live.store, concurrency=4)
    (held,) = live.run(eng.claim(4))             # the first holds the key's one slot (its lease); the second waits
    assert held["run_id"] == first
    page = writer.get(f"/runs/{second}")
    assert page.status == 200 and 'id="why"' in page.text
    section = page.text[page.text.index('id="why"'):page.text.index("</section>", page.text.index('id="why"'))]
    assert "1/1" in section and "FULL" in section and f'<a href="/runs/{first}">' in section
    assert 'id="why"' not in writer.get(f"/runs/{first}").text        # running: nothing holds it back
