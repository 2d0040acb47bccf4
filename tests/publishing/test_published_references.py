"""`publish` settles a file's references against what the project has already published (issue 15 item 4):
a workflow published alone after its queue file, its connector file or (for a trigger file) its workflow is
accepted; a reference to something neither in the files nor published is refused with A44211 and a hint
that names what exists. Real PostgreSQL (tests/runtime/pg.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from anthares44.automation.api import Automation
from tests.runtime.test_api import P, auto  # noqa: F401 - the Python API on the test store, as a fixture

QUEUE = "id: q_orders\nmaxConcurrency: 4\n"
CONNECTOR = "- id: con_erp\n  type: http\n  baseUrl: https://erp.example.test\n"
ON_QUEUE = """\
name: on-queue
version: 1
queue: {queue}
steps:
  - id: a
    uses: pass
    timeout: 1s
"""
ON_CONNECTOR = """\
name: on-connector
version: 1
steps:
  - id: call
    uses: con_erp
    method: GET
    path: /health
    timeout: 5s
"""
TRIGGER = "id: trg_nightly\ntype: manual\nworkflow: wf_on_queue\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_a_workflow_published_alone_settles_its_queue_against_the_published_one(auto, aio, tmp_path):
    first = aio(auto.publish([write(tmp_path, "q.yaml", QUEUE)]))
    assert first.ok and first.queues == [("q_orders", "created")]
    alone = aio(auto.publish([write(tmp_path, "wf.yaml", ON_QUEUE.format(queue="q_orders"))]))
    assert alone.ok, [d.format() for d in alone.diagnostics]
    assert [(w.workflow_id, w.outcome) for w in alone.workflows] == [("wf_on_queue", "created")]
    # and a trigger file alone settles its workflow against the published one
    trig = aio(auto.publish([write(tmp_path, "t.yaml", TRIGGER)]))
    assert trig.ok and trig.triggers == ["trg_nightly"], [d.format() for d in trig.diagnostics]


def test_an_unknown_queue_is_refused_with_a_hint_naming_the_published_ones(auto, store, aio, tmp_path):
    aio(auto.publish([write(tmp_path, "q.yaml", QUEUE)]))
    other = Automation(store, "pj_other")     # another project's queues are not this one's
    try:
        assert aio(other.publish([write(tmp_path, "q2.yaml", "id: q_elsewhere\nmaxConcurrency: 1\n")])).ok
    finally:
        aio(other.close())
    refused = aio(auto.publish([write(tmp_path, "wf.yaml", ON_QUEUE.format(queue="q_ordres"))]))
    assert not refused.ok and refused.workflows == []
    [d] = refused.diagnostics
    assert d.code == "A44211" and d.severity.value == "error"
    assert "'q_ordres'" in d.message and "published in project pj_default" in d.message
    assert d.message.endswith("known: q_orders") and d.hint == "did you mean 'q_orders'?"


def test_a_workflow_published_alone_carries_the_published_connector_settings(auto, aio, store, tmp_path):
    stored = aio(auto.publish([write(tmp_path, "c.yaml", CONNECTOR)]))
    assert stored.ok and stored.connectors == [("con_erp", "created")]
    again = aio(auto.publish([write(tmp_path, "c.yaml", CONNECTOR)]))
    assert again.connectors == [("con_erp", "unchanged")]
    alone = aio(auto.publish([write(tmp_path, "wf.yaml", ON_CONNECTOR)]))
    assert alone.ok, [d.format() for d in alone.diagnostics]
    ir = aio(store.latest_version(P, "wf_on_connector"))["ir"]
    [node] = ir["nodes"]
    assert node["connector"]["kind"] == "declared"
    assert node["connector"]["config"]["baseUrl"] == "https://erp.example.test"


def test_publish_refuses_a_code_workflow_lint_finds_wrong_with_its_diagnostic(auto, aio, store, tmp_path):
    bad = tmp_path / "onboard.py"
    bad.write_text("from anthares44.automation import step, workflow\n\n\n"
                   "@workflow('tenant-onboard', version=1)\nasync def onboard(ctx, input):\n"
                   "    return await step.run('create tenant', fn=lambda: 1, timeout='10s')\n")
    refused = aio(auto.publish([str(bad)]))
    assert not refused.ok and refused.workflows == []
    assert [(d.code, d.line, d.col) for d in refused.diagnostics] == [("A44803", 6, 27)]


def test_console_script_publishes_a_workflow_alone_after_its_queue_and_connector(pg_url, tmp_path):
    """As a user types it: `a44 automation publish` in subprocesses against the test database."""
    from tests.cli.test_runtime_verbs import A44, a44_env

    env = a44_env(pg_url)

    def publish(*files):
        return subprocess.run([A44, "automation", "publish", *files], env=env, capture_output=True, text=True,
                              timeout=120)

    first = publish(write(tmp_path, "q.yaml", QUEUE), write(tmp_path, "c.yaml", CONNECTOR))
    assert (first.returncode, first.stdout) == (0, "q_orders (queue) created\ncon_erp (connector) created\n"), \
        first.stderr
    both = ON_CONNECTOR.replace("version: 1\n", "version: 1\nqueue: q_orders\n")
    alone = publish(write(tmp_path, "wf.yaml", both))
    assert (alone.returncode, alone.stdout) == (0, "wf_on_connector v1 created\n"), alone.stdout + alone.stderr
    refused = publish(write(tmp_path, "wf2.yaml", ON_QUEUE.format(queue="q_nowhere")))
    assert refused.returncode == 1 and "error A44211 queue 'q_nowhere'" in refused.stdout
    assert "nothing was stored" in refused.stderr
