"""One run-creation text: `run_create` and the webhook fast path `webhook_ingest` include the same fragment
(`run_create_rows`), and the loader refuses fragments nobody includes and includes of unknown fragments."""

from __future__ import annotations

import pytest

from anthares44.automation.runtime.store.vocabulary import QueryError, load_queries


def test_run_create_and_webhook_ingest_share_one_text():
    queries = load_queries()
    assert "run_create_rows" not in queries             # a fragment is not a query: it cannot run alone
    rows = "insert into automation.runs"
    run_create, webhook = queries["run_create"].text, queries["webhook_ingest"].text
    assert run_create.count(rows) == webhook.count(rows) == 1
    start = run_create.index("claim as (")
    shared = run_create[start:run_create.index("\nselect", start)]
    assert "insert into automation.idempotency_keys" in shared and "'run.created'" in shared
    assert shared in webhook
    assert "-- include:" not in run_create + webhook


def test_fragments_are_checked_at_load(tmp_path):
    (tmp_path / "a.sql").write_text("-- fragment: pick\n-- purpose: one row\nselect 1\n\n"
                                    "-- name: q1\n-- purpose: uses pick\n-- include: pick\n;\n"
                                    "-- name: q2\n-- purpose: uses pick too\nselect * from (\n  -- include: pick\n) x;\n")
    got = load_queries(tmp_path)
    assert sorted(got) == ["q1", "q2"] and got["q1"].sql == "select 1\n;" and "select 1" in got["q2"].sql

    bad = tmp_path / "unused"
    bad.mkdir()
    (bad / "b.sql").write_text("-- fragment: lonely\n-- purpose: nobody\nselect 1\n\n-- name: q\n-- purpose: x\nselect 2;\n")
    with pytest.raises(QueryError, match="lonely"):
        load_queries(bad)
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "c.sql").write_text("-- name: q\n-- purpose: x\n-- include: missing\n;\n")
    with pytest.raises(QueryError, match="missing"):
        load_queries(unknown)
