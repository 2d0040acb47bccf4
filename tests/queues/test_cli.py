"""`a44 automation dlq ...` and `queues stats` as written in the manual (acceptance lines), text and JSON."""

from __future__ import annotations

import json
import re

from anthares44.automation.cli.main import main
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.runtime import queues as rq
from tests.queues.test_dlq import _publish


def test_cli_dlq_and_queues(store, aio, pg_url, monkeypatch, capsys):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    shown: list[str] = []
    ir = _publish(store, aio, queue=Queue(id="q_invoice_settle"))
    from anthares44.automation.runtime.store.core import Store

    live = aio(Store.connect(pg_url))                    # the system clock, as the CLI's --since 24h uses
    out = aio(rq.deliver_envelope(live, "pj_default", ir.workflow_id, b'{"broken'))
    aio(live.close())
    dl_id = out["dead_letter_id"]
    capsys.readouterr()
    assert main(["automation", "dlq", "stats", "q_invoice_settle", "--since", "24h"]) == 0
    text = capsys.readouterr().out
    shown.append(text)
    assert "E_ENVELOPE_INVALID" in text
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", text) and "+00:00" not in text   # one instant format
    assert main(["automation", "dlq", "show", dl_id, "--with-attempts", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["envelope"] == '{"broken' and doc["error_code"] == "E_ENVELOPE_INVALID"
    assert doc["created_at"].endswith("Z") and doc["redriven_at"] is None
    assert main(["automation", "dlq", "redrive", "q_invoice_settle", "--filter", "error_code == 'E_UPSTREAM_503'",
                 "--rate", "20/s", "--max", "5000"]) == 0
    text = capsys.readouterr().out
    shown.append(text)
    assert "matched 0" in text
    assert main(["automation", "dlq", "redrive", "q_invoice_settle", "--filter", "error_code ==", "--dry-run"]) == 2
    err = capsys.readouterr().err
    shown.append(err)
    assert "--filter:1:" in err and "E_DLQ_FILTER" in err
    assert main(["automation", "dlq", "redrive", "q_invoice_settle", "--rate=-3/s"]) == 2
    assert main(["automation", "dlq", "stats", "q_missing"]) == 1
    capsys.readouterr()
    assert main(["automation", "queues", "stats"]) == 0
    text = capsys.readouterr().out
    shown.append(text)
    assert "q_invoice_settle" in text and "q_default" in text
    import sys
    sys.__stderr__.write("".join(shown))
