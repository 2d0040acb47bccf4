"""The console's pages over real runs: filters with the total first and keyset pages, the run page (failing step,
timeline, DAG, attempts), replay from the page (preview first, then once), live events, and the DLQ redrive."""

from __future__ import annotations

import re

from anthares44.automation.compiler.ir import seal, to_json
from anthares44.automation.compiler.models.queues import Queue
from anthares44.automation.runtime import queues as rq
from tests.runtime.engine_support import PROJECT, Script, engine, node, publish_and_run, workflow

from .test_auth import Hostile, failed_run, run_state


def run_ids(page) -> list[str]:
    return re.findall(r'<a href="/runs/(run_[A-Za-z0-9]+)">', page.text)


def test_runs_filter_with_the_total_first_and_keyset_pages(live, writer):
    ir = workflow([node("only")], name="bulk")
    created = [live.run(publish_and_run(live.store, ir, key=f"bulk-{i}")) for i in range(7)]
    failed = failed_run(live)
    page = writer.get("/runs?state=failed")
    assert page.status == 200 and "<strong>1</strong> matching run" in page.text and run_ids(page) == [failed]
    assert run_ids(writer.get("/runs?error_code=E_UPSTREAM_400&workflow=pay")) == [failed]
    assert run_ids(writer.get("/runs?step=charge")) == [failed]
    assert run_ids(writer.get("/runs?error_code=E_NOPE")) == []
    assert run_ids(writer.get("/runs?since=1h&workflow=wf_bulk")) == run_ids(writer.get("/runs?workflow=wf_bulk"))
    assert run_ids(writer.get("/runs?until=2000-01-01T00:00:00Z")) == []
    # keyset pages of 3: every run once, newest first, the total the same on each page
    seen, path = [], "/runs?workflow=wf_bulk&limit=3"
    while path:
        page = writer.get(path.replace("&amp;", "&"))
        assert "<strong>7</strong> matching runs" in page.text
        seen += run_ids(page)
        more = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        path = more.group(1) if more else None
    assert len(seen) == 7 and set(seen) == set(created)
    assert writer.get("/runs?after=garbage").status == 400


def test_the_run_page_shows_the_failing_step_its_error_the_timeline_and_the_graph(live, writer):
    run_id = failed_run(live)
    page = writer.get(f"/runs/{run_id}")
    assert page.status == 200
    failure = page.text[page.text.index('id="failure"'):]
    assert "Failing step: <code>charge</code>" in failure and "E_UPSTREAM_400" in failure
    assert re.search(r'class="node n-succeeded" data-step="fetch"', page.text)
    assert re.search(r'class="node n-failed" data-step="charge"', page.text)
    assert page.text.count('class="lane"') == 3               # queued, fetch, charge
    assert 'class="b-failed"' in page.text and 'class="b-lease_wait"' in page.text
    assert re.search(r'id="trace-id">[0-9a-f]{32}<', page.text)


def test_the_run_page_shows_a_sleeping_steps_due_instant(live, writer):
    from anthares44.automation.jsonenc import iso

    run_id = live.run(publish_and_run(live.store, workflow([node("nap", sleep_ms=3_600_000)], name="napper")))
    assert live.run(engine(live.store).drive()) == {run_id: "sleeping"}
    due = live.run(live.store.get_run(run_id))["due_at"]
    page = writer.get(f"/runs/{run_id}")
    assert re.search(r'id="timer-nap">Sleeping: <code>nap</code> until <time datetime="' + re.escape(iso(due)),
                     page.text)


def test_replay_from_the_page_previews_first_then_replays_once(live, writer):
    run_id = failed_run(live)
    page = writer.get(f"/runs/{run_id}")
    preview = writer.post(f"/runs/{run_id}/replay", {"csrf": page.field("csrf"), "from_step": "charge"})
    assert preview.status == 200 and "Replay preview (dry run" in preview.text
    assert run_state(live, run_id) == ("failed", 0)                        # the preview changed nothing
    form = {k: preview.field(k) for k in ("csrf", "confirm", "request_id", "cut", "from_step")}
    assert form["confirm"] == "1" and form["from_step"] == "charge"
    assert writer.post(f"/runs/{run_id}/replay", form).status == 303
    again = writer.post(f"/runs/{run_id}/replay", form)                  # sent twice: one replay
    assert again.status == 409 and "E_REPLAY_NOT_TERMINAL" in again.text
    assert run_state(live, run_id) == ("pending", 1)

    class Fixed(Hostile):
        async def invoke(self, params, ctx):
            return {"charged": True, "api_token": "sk_live_secret"}
    assert live.run(engine(live.store, Script(), Fixed()).drive()) == {run_id: "succeeded"}
    page = writer.get(f"/runs/{run_id}")
    assert 'id="run-state">succeeded<' in page.text and "epoch 1 at" in page.text
    assert "sk_live_secret" not in page.text and "[redacted]" in page.text     # results are redacted


def test_live_events_stream_the_run_until_it_ends(live, writer):
    run_id = failed_run(live)
    page = writer.get(f"/runs/{run_id}/live")
    assert page.status == 200 and page.headers["content-type"].startswith("text/event-stream")
    assert "event: change" in page.text and page.text.rstrip().endswith("event: end\ndata: {}")
    assert f'"run_id":"{run_id}"' in page.text.replace(" ", "")


def test_dlq_page_stats_entry_and_redrive_with_a_dry_run_first(live, writer):
    store = live.store
    live.run(rq.store_queues(store, PROJECT, [Queue(id="q_dl", maxAttempts=1)]))
    ir = seal(workflow([node("s1")], name="dl").model_copy(update={"queue": "q_dl"}))
    live.run(store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir)))
    for i in (1, 2):
        raw = (f'{{"id":"evt_{i}","type":"t","idempotency_key":"k-{i}","partition_key":null,'
               f'"occurred_at":"2026-07-19T14:02:11.884Z","attempt":1,"data":{{"n":{i}}}}}').encode()
        live.run(rq.deliver_envelope(store, PROJECT, ir.workflow_id, raw))
    live.run(engine(store, Script(plan={"s1": ["perm", "perm"]})).drive())
    page = writer.get("/dlq?queue=q_dl")
    assert page.status == 200 and "q_dl: 2 dead letters by error code" in page.text
    ids = re.findall(r'<a href="/dlq/entries/(dlq_[A-Za-z0-9]+)">', page.text)
    assert len(set(ids)) == 2
    entry = writer.get(f"/dlq/entries/{ids[0]}")
    assert entry.status == 200 and "E_UPSTREAM_400" in entry.text and "<h2>Envelope</h2>" in entry.text
    assert "&#34;idempotency_key&#34;:&#34;k-" in entry.text       # the envelope as received, escaped
    form = {"csrf": entry.field("csrf"), "queue": "q_dl", "filter": entry.field("filter")}
    preview = writer.post("/dlq/redrive", form)
    assert preview.status == 200 and "1 of 2 would be redriven" in preview.text
    waiting = lambda: sum(r["redriven_at"] is None for r in live.run(rq.dlq_list(store, PROJECT, "q_dl", 10)))  # noqa: E731
    assert waiting() == 2
    bad = writer.post("/dlq/redrive", {**form, "filter": "error_code ==="})
    assert bad.status == 400 and "E_DLQ_FILTER" in bad.text
    done = writer.post("/dlq/redrive", {**form, "confirm": preview.field("confirm")})
    assert done.status == 303 and done.location == "/dlq?queue=q_dl&redriven=1" and waiting() == 1


def test_the_other_pages_answer(live, writer):
    for path in ("/partitions", "/partitions?workflow=wf_pay", "/alerts", "/alerts?state=firing", "/schedules"):
        assert writer.get(path).status == 200, path
    assert writer.get("/alerts?state=nope").status == 400


def test_partitions_grid_colours_each_partition_by_state(pg_url, tmp_path):
    from anthares44.automation.clock import ManualClock
    from tests.ingestion.support import LiveServer
    from tests.partitions.support import ThreadedDailyApi, compile_yaml, daily_yaml, start

    from .conftest import make_token
    from .support import Client

    api = ThreadedDailyApi()
    api.reject = {"2026-07-03"}
    clock = ManualClock()
    live = LiveServer(pg_url, clock=clock, results_dir=tmp_path / "results")
    try:
        live.run(live.store.ensure_partitions())
        ir = compile_yaml(tmp_path, daily_yaml(api.url))
        eng, run_id, run = live.run(start(live.store, clock, ir, "2026-07-01", "2026-07-04"))
        assert run["state"] == "partial"
        c = Client(live.port)
        c.login(make_token(live))
        page = c.get("/partitions?workflow=wf_daily_load")
        assert page.status == 200
        cells = dict(re.findall(r'<th scope="row">(2026-07-0\d)</th>\s*<td><a class="cell s-(\w+)" href="/runs/'
                                + run_id, page.text))
        assert cells == {"2026-07-01": "success", "2026-07-02": "success", "2026-07-03": "failed",
                         "2026-07-04": "success"}
        live.run(eng.registry.aclose())
    finally:
        live.close()
        api.close()


def test_schedules_show_the_next_firings_with_the_dst_shift_marked(live, writer, tmp_path):
    from anthares44.automation.app.publishing import publish

    (tmp_path / "wf").mkdir()
    (tmp_path / "wf" / "report.yaml").write_text(
        'name: march-report\nversion: 1\ntrigger:\n  cron: "30 2 * 3 0"\n  tz: Europe/Berlin\n'
        "  dstPolicy: run-once\nsteps:\n  - id: only\n    uses: pass\n    timeout: 2s\n")
    assert live.call(publish, PROJECT, [str(tmp_path / "wf")]).ok
    page = writer.get("/schedules")
    assert page.status == 200 and "<code>30 2 * 3 0</code> in Europe/Berlin" in page.text
    firings = re.findall(r"<li>(\d{4}-03-\d\dT02:30|\d{4}-03-\d\dT03:30)[^<]*(<mark>[^<]+</mark>)?", page.text)
    assert firings and any(mark == "<mark>DST: shifted past the gap</mark>" for _, mark in firings), firings


def labelled(html: str) -> list[str]:
    """The visible form fields of a page that have no label (wrapping <label>, or <label for=id>)."""
    from html.parser import HTMLParser

    class Fields(HTMLParser):
        def __init__(self):
            super().__init__()
            self.depth, self.fors, self.fields = 0, set(), []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "label":
                self.depth += 1
                if a.get("for"):
                    self.fors.add(a["for"])
            elif tag in ("input", "select", "textarea") and a.get("type") != "hidden":
                self.fields.append((a.get("name"), a.get("id"), self.depth > 0))

        def handle_endtag(self, tag):
            if tag == "label":
                self.depth -= 1
    p = Fields()
    p.feed(html)
    return [name for name, id_, wrapped in p.fields if not wrapped and id_ not in p.fors]


def test_every_field_of_every_page_has_a_label(live, writer):
    run_id = failed_run(live)
    paths = ["/runs", f"/runs/{run_id}", "/partitions", "/dlq", "/alerts", "/schedules"]
    for path in paths:
        page = writer.get(path)
        assert page.status == 200 and labelled(page.text) == [], path
        assert '<html lang="en">' in page.text and 'name="viewport"' in page.text
    assert labelled(writer.get("/login").text) == []


def test_alerts_page_shows_a_firing_alert_with_its_history(live, writer):
    from anthares44.automation.runtime.alerts import rules as rule_store
    from anthares44.automation.runtime.alerts.evaluator import Evaluator

    live.run(rule_store.upsert_builtin(live.store, PROJECT, notify=None, escalate_to=None, severity="p2",
                                       window_s=600, update_every=2))
    failed_run(live)
    assert live.run(Evaluator(live.store, holder="d1", interval_s=15).step()) is True
    page = writer.get("/alerts?state=firing")
    assert page.status == 200 and "builtin:run_failed" in page.text
    assert '<span class="state s-firing">firing</span>' in page.text and "<h3>History</h3>" in page.text
    assert "firing (1) → not sent (no channel)" in page.text
    assert "builtin:run_failed" not in writer.get("/alerts?state=resolved").text


def test_resolve_an_exclusive_step_and_skip_a_failed_one_from_the_run_page(pg_url, tmp_path):
    import asyncio

    from anthares44.automation.clock import ManualClock
    from tests.ingestion.support import LiveServer

    from .conftest import make_token
    from .support import Client

    clock = ManualClock()
    live = LiveServer(pg_url, clock=clock, results_dir=tmp_path / "results")
    try:
        live.run(live.store.ensure_partitions())
        s = Script(plan={"pay": ["block:never"]})
        run_id = live.run(publish_and_run(live.store, workflow([node("pay", exclusive=True), node("after")],
                                                               name="excl")))

        async def start_and_die():     # the worker dies with the exclusive step in flight
            task = asyncio.create_task(engine(live.store, s, clock=clock, worker_id="dead").run_once())
            while not s.called("pay"):
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        live.run(start_and_die())
        clock.advance(31)
        eng = engine(live.store, s, clock=clock, worker_id="w2")
        assert live.run(eng.drive()) == {run_id: "awaiting_confirmation"}
        c = Client(live.port)
        c.login(make_token(live))
        page = c.get(f"/runs/{run_id}")
        assert 'class="node n-awaiting_confirmation" data-step="pay"' in page.text
        assert f'action="/runs/{run_id}/resolve"' in page.text and "Preview the replay" not in page.text
        done = c.post(f"/runs/{run_id}/resolve", {"csrf": page.field("csrf"), "step": page.field("step"),
                                                  "outcome": "failed"})
        assert done.status == 303 and live.run(eng.drive()) == {run_id: "failed"}
        page = c.get(f"/runs/{run_id}")
        assert "E_CONFIRMED_FAILED" in page.text and f'action="/runs/{run_id}/skip"' in page.text
        skipped = c.post(f"/runs/{run_id}/skip", {"csrf": page.field("csrf"), "step": "pay", "reason": ""})
        assert skipped.status == 400 and "reason" in skipped.text             # a skip says why
        before = live.run(live.store.get_run(run_id))["state"]
        skipped = c.post(f"/runs/{run_id}/skip", {"csrf": page.field("csrf"), "step": "pay",
                                                  "reason": "paid by hand, ticket OPS-12"})
        assert (before, skipped.status) == ("failed", 303)
        assert "OPS-12" in str(live.run(live.store.list_run_events(run_id)))
    finally:
        live.close()


def test_cancel_a_pending_run_from_the_run_page(live, writer):
    """The run page offers cancel while the run can still be stopped; the form needs the CSRF token, records who
    and why, and is gone once the run is cancelled."""
    run_id = live.run(publish_and_run(live.store, workflow([node("a")], name="later")))   # no daemon: pending
    page = writer.get(f"/runs/{run_id}")
    assert f'action="/runs/{run_id}/cancel"' in page.text
    assert writer.post(f"/runs/{run_id}/cancel", {"reason": "not today"}).status == 403
    assert run_state(live, run_id)[0] == "pending"
    done = writer.post(f"/runs/{run_id}/cancel", {"csrf": page.field("csrf"), "reason": "not today"})
    assert done.status == 303 and run_state(live, run_id)[0] == "cancelled"
    assert "not today" in str(live.run(live.store.list_run_events(run_id)))
    page = writer.get(f"/runs/{run_id}")
    assert "cancelled" in page.text and f'action="/runs/{run_id}/cancel"' not in page.text


def test_the_trace_id_links_to_the_tracing_ui_only_for_an_http_template(pg_url, tmp_path):
    from anthares44.automation.settings import Settings
    from tests.ingestion.support import LiveServer

    from .conftest import make_token
    from .support import Client

    for template, linked in (("http://127.0.0.1:16686/trace/{trace_id}", True),
                             ("javascript:alert(1)//{trace_id}", False), (None, False)):
        live = LiveServer(pg_url, results_dir=tmp_path / "results", settings=Settings(trace_url=template))
        try:
            run_id = live.run(publish_and_run(live.store, workflow([node("a")], name="traced"), key=str(linked)))
            c = Client(live.port)
            c.login(make_token(live))
            text = c.get(f"/runs/{run_id}").text
            trace = re.search(r'id="trace-id">([0-9a-f]{32})<', text).group(1)
            assert (f'href="http://127.0.0.1:16686/trace/{trace}"' in text) is linked
            assert "javascript:" not in text
        finally:
            live.close()


def test_a_malformed_run_id_answers_the_consoles_404_page(live, writer):
    """An id the path check refuses names no run: the console's error page (HTML, 404), like an unknown id;
    the REST API keeps its JSON 400, and a signed-out visitor still gets the login form."""
    for path in ("/runs/not%20an%20id", "/runs/..%2Fetc", "/runs/" + "x" * 300, "/runs/run_01KXXAYDNR1VR9RDRHR1V6D7VJ"):
        page = writer.get(path)
        assert page.status == 404 and page.headers["content-type"].startswith("text/html"), (path, page.status)
        assert "E_RUN_NOT_FOUND" in page.text and "<!doctype html>" in page.text
    hostile = writer.get("/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert hostile.status == 404 and "<script>alert(1)" not in hostile.text
    api = writer.get("/v1/automation/runs/not%20an%20id")
    assert api.status == 400 and api.headers["content-type"].startswith("application/json")
    from .support import Client
    anon = Client(live.port).get("/runs/not%20an%20id")
    assert anon.status in (302, 303) or "login" in anon.text.lower()
