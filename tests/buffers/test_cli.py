"""`flow buffers` and `runs show` of a run that carries buffered events, through the CLI against the database
(local) and against a live daemon (remote): the same JSON, and the text a person reads."""

from __future__ import annotations

import json

from anthares44.automation.app.publishing import publish
from anthares44.automation.runtime.ingestion.bus import publish_event
from tests.cli_support import run_cli
from tests.ingestion.support import P
from tests.rest.support import api, target  # noqa: F401 - the fixtures

from .support import batch_wf, debounce_wf


def test_flow_buffers_and_runs_show_local_and_remote(api, target, capsys, tmp_path):
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "doc.yaml").write_text(debounce_wf(quiet="1h", max_wait="2h"))
    (tmp_path / "flow" / "batch.yaml").write_text(batch_wf(max_size=2, max_wait="1h"))
    assert api.live.call(publish, P, [str(tmp_path / "flow")]).ok
    api.live.call(publish_event, P, "doc.changed", {"docId": "d1"}, "k1")
    api.live.call(publish_event, P, "order.placed", {"tenantId": "acme"}, "o1")
    second = api.live.call(publish_event, P, "order.placed", {"tenantId": "acme"}, "o2")
    run_id = second.deliveries[0]["run_id"]          # the event that filled the batch started its run

    def cli(where: str, *argv: str, fmt: str = "json"):
        code, out, err = run_cli(capsys, *argv, *target(where), "--format", fmt)
        assert code == 0, (where, argv, out, err)
        return json.loads(out) if fmt == "json" else out

    local, remote = (cli(w, "automation", "flow", "buffers") for w in ("local", "remote"))
    assert local == remote
    assert [(b["workflow_id"], b["key"], b["events"], b["due_for"]) for b in local["buffers"]] == [
        ("wf_doc_sync", "d1", 1, "quiet")]
    assert cli("remote", "automation", "flow", "buffers", "--workflow", "tenant-batch") == {"buffers": []}
    text = cli("local", "automation", "flow", "buffers", fmt="text")
    assert "wf_doc_sync" in text and "debounce" in text and "d1" in text

    shown = [cli(w, "automation", "runs", "show", run_id)["carried"] for w in ("local", "remote")]
    assert shown[0] == shown[1] and shown[0]["count"] == 2 and shown[0]["reason"] == "maxSize"
    text = cli("remote", "automation", "runs", "show", run_id, fmt="text")
    assert "carries 2 events of batch buffer" in text and "o1" in text and "o2" in text
