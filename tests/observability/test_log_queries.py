"""`logs query` over the attempts of every run of a project: each filter selects exactly the matching rows,
newest first; an answer stops at --limit and says so with a cursor whose pages add up to the whole answer; more
than 10,000 rows per answer is refused with a coded error; the same on the REST API with a read token."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from anthares44.automation.app.automation import Automation
from anthares44.automation.errors import E_LOG_CURSOR, E_LOG_LIMIT, A44Error
from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.cli.test_runtime_verbs import cli
from tests.ingestion.support import LiveServer, bearer, request

from .log_support import P, Row, seed, spread


def expected(rows: list[Row], **want) -> list[tuple]:
    keep = [r for r in rows if all(getattr(r, k) == v for k, v in want.items())]
    return [r.key() for r in sorted(keep, key=Row.key, reverse=True)]


def keys(page) -> list[tuple]:
    return [(r["started_at"], r["run_id"], r["step_id"], r["epoch"], r["kind"], r["attempt"]) for r in page.rows]


@pytest.fixture
def seeded(store, aio, clock):
    rows = spread(clock.now() - timedelta(hours=20), 60, timedelta(minutes=15))
    aio(seed(store, rows))
    auto = Automation(store, P)
    yield auto, rows
    aio(auto.close())


def test_each_filter_selects_exactly_its_rows_newest_first(seeded, aio):
    auto, rows = seeded
    cases = [({}, {}), ({"error_code": "E_UPSTREAM_503"}, {"error_code": "E_UPSTREAM_503"}),
             ({"step": "charge"}, {"step_id": "charge"}), ({"partition_key": "acct_1"}, {"partition_key": "acct_1"}),
             ({"workflow": "settle"}, {"workflow_id": "wf_settle"}),      # a name works as in `runs --workflow`
             ({"error_code": "E_NETWORK", "step": "reserve", "workflow": "wf_settle"},
              {"error_code": "E_NETWORK", "step_id": "reserve", "workflow_id": "wf_settle"})]
    for args, want in cases:
        page = aio(auto.query_logs(limit=1000, **args))
        assert keys(page) == expected(rows, **want), args
        assert page.truncated is False and page.next is None
    assert len(expected(rows, error_code="E_UPSTREAM_503")) < len(rows)
    # the time range: --since 8h sees only the last eight hours
    recent = aio(auto.query_logs(since="8h", limit=1000))
    assert keys(recent) == [k for k in expected(rows) if k[0] >= auto.store.clock.now() - timedelta(hours=8)]
    assert 0 < len(recent.rows) < len(rows)
    other = Automation(auto.store, "pj_other")
    assert aio(other.query_logs(limit=1000)).rows == []                     # another project sees nothing


def test_a_truncated_answer_says_so_and_its_pages_add_up(seeded, aio):
    auto, rows = seeded
    pages, after = [], None
    while True:
        page = aio(auto.query_logs(limit=7, after=after))
        pages.append(page)
        if not page.truncated:
            break
        assert len(page.rows) == 7 and page.next
        after = page.next
    assert [k for p in pages for k in keys(p)] == expected(rows)              # every row once, in order
    assert len(pages) == -(-len(rows) // 7)


def test_more_than_ten_thousand_rows_or_a_forged_cursor_is_refused(seeded, aio):
    auto, _ = seeded
    assert len(aio(auto.query_logs(limit=10_000)).rows) == 60
    with pytest.raises(A44Error) as exc:
        aio(auto.query_logs(limit=10_001))
    assert exc.value.code == E_LOG_LIMIT and "--after" in exc.value.hint
    with pytest.raises(A44Error) as exc:
        aio(auto.query_logs(after="bm90LWEtY3Vyc29y"))
    assert exc.value.code == E_LOG_CURSOR


def test_the_cli_prints_tables_json_and_jsonl_and_refuses_a_limit_over_the_ceiling(seeded, capsys, monkeypatch,
                                                                                  pg_url):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.setenv("A44_PROJECT", P)
    since = ("--since", "2026-07-18T00:00:00Z", "--until", "2026-07-20")   # the ManualClock's day; the CLI's is now
    code, out, err = cli(capsys, "logs", "query", *since, "--error-code", "E_UPSTREAM_503", "--limit", "3")
    assert code == 0, err
    assert out.splitlines()[0].split()[:4] == ["STARTED", "RUN", "WORKFLOW", "STEP"]
    assert "truncated at --limit 3; the next page: --after " in out.splitlines()[-1]
    cursor = out.splitlines()[-1].rsplit(" ", 1)[1].rstrip(")")
    code, out, err = cli(capsys, "logs", "query", *since, "--error-code", "E_UPSTREAM_503", "--limit", "3", "--after",
                         cursor,
                         "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["count"] == 3 and {r["error_code"] for r in doc["rows"]} == {"E_UPSTREAM_503"}
    code, out, err = cli(capsys, "logs", "query", *since, "--step", "notify", "--format", "jsonl", "--limit", "1000")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(lines) == 20 and {x["step_id"] for x in lines} == {"notify"} and err == ""
    code, out, err = cli(capsys, "logs", "query", "--limit", "20000")
    assert code == 2 and err.startswith("E_LOG_LIMIT ") and "Traceback" not in err and out == ""
    code, out, err = cli(capsys, "logs", "query", "--since", "yesterday-ish")
    assert code == 2 and err.startswith("E_INVALID_ARGUMENT ")


def test_the_rest_api_answers_the_same_query_with_a_read_token(pg_url, tmp_path, aio, capsys, monkeypatch):
    live = LiveServer(pg_url, results_dir=tmp_path / "results")
    try:
        now = live.clock.now()
        rows = spread(now - timedelta(hours=10), 30, timedelta(minutes=10))
        live.call(seed, rows)
        read = live.call(create_token, P, "ro", ["automation:read"], timedelta(days=1), None).token
        s, doc, _ = request(live.port, "GET", "/v1/automation/logs?error_code=E_NETWORK&since=1d&limit=4",
                            headers=bearer(read))
        assert s == 200, doc
        want = expected(rows, error_code="E_NETWORK")
        assert doc["truncated"] is True and doc["count"] == 4 and doc["next"]
        assert [(r["run_id"], r["step_id"], r["attempt"]) for r in doc["rows"]] == [(k[1], k[2], k[5])
                                                                                 for k in want[:4]]
        s, doc2, _ = request(live.port, "GET", f"/v1/automation/logs?error_code=E_NETWORK&since=1d&limit=100"
                                               f"&cursor={doc['next']}", headers=bearer(read))
        assert s == 200 and doc2["count"] == len(want) - 4 and doc2["truncated"] is False
        s, err, _ = request(live.port, "GET", "/v1/automation/logs?limit=10001", headers=bearer(read))
        assert s == 400 and err["error"]["code"] == "E_LOG_LIMIT"
        s, err, _ = request(live.port, "GET", "/v1/automation/logs?cursor=%2E%2E", headers=bearer(read))
        assert s == 400 and err["error"]["code"] == "E_BAD_REQUEST"
        assert request(live.port, "GET", "/v1/automation/logs")[0] == 401
        # the CLI's remote mode pages through the same API and prints what the local mode prints
        monkeypatch.setenv("A44_DATABASE_URL", pg_url)
        monkeypatch.setenv("A44_PROJECT", P)
        monkeypatch.setenv("A44_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("A44_API_URL", live.url)
        monkeypatch.setenv("A44_API_TOKEN", read)
        args = ("logs", "query", "--error-code", "E_NETWORK", "--since", "1d", "--limit", "4", "--format", "json")
        code, out, err = cli(capsys, *args, "--remote")
        remote = json.loads(out)
        assert code == 0, err
        code, out, err = cli(capsys, *args, "--local")
        assert json.loads(out) == remote and remote["truncated"] and remote["count"] == 4
        code, out, err = cli(capsys, *args[:-2], "--after", remote["next"], "--format", "json", "--remote")
        assert code == 0 and json.loads(out)["count"] == len(want) - 4, err
    finally:
        live.close()
