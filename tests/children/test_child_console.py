"""The console's run page shows the tree of child workflows (§21): on the parent and on the child, each run of
the lineage with its state, the one shown in bold, the others linked; a run of no tree shows no section."""

from __future__ import annotations

from tests.children.support import child_node, publish, tree
from tests.console.conftest import live, writer  # noqa: F401 - the fixtures
from tests.runtime.engine_support import PROJECT, Script, engine, node, workflow


def test_the_run_page_shows_the_tree_with_states_and_links(live, writer):
    kid = workflow([node("work")], name="kid")
    parent = workflow([child_node("onboard", "wf_kid")], name="parent")
    live.run(publish(live.store, parent, kid))
    run_id = live.run(live.store.create_run(PROJECT, parent.workflow_id, {}, "console-1")).run_id
    live.run(engine(live.store, Script()).drive())
    [_, child] = live.run(tree(live.store, run_id))
    page = writer.get(f"/runs/{run_id}")
    assert page.status == 200 and 'id="tree"' in page.text
    section = page.text[page.text.index('id="tree"'):page.text.index("</section>", page.text.index('id="tree"'))]
    assert f"<strong>{run_id}</strong>" in section and f'<a href="/runs/{child["run_id"]}">' in section
    assert "<code>onboard</code>" in section and section.count('class="state">succeeded<') == 2
    page = writer.get(f"/runs/{child['run_id']}")
    assert f'<a href="/runs/{run_id}">' in page.text and f"<strong>{child['run_id']}</strong>" in page.text
    lone = live.run(live.store.create_run(PROJECT, kid.workflow_id, {}, "console-2")).run_id
    assert 'id="tree"' not in writer.get(f"/runs/{lone}").text
