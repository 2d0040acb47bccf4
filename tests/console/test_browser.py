"""The console in a real headless Chromium (Debian's, driven by Playwright) against a real `serve` subprocess:
sign in and out, open the failed run and read its failing step, replay it from the page and watch it succeed
live (SSE, no reload), redrive a dead letter, and a POST without the CSRF token refused."""

from __future__ import annotations

import os
import re

import pytest

from .browser_support import CHROMIUM, Scene

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no {CHROMIUM}", allow_module_level=True)


@pytest.fixture(scope="module")
def scene(pg_admin_url, pg_template, tmp_path_factory):
    import asyncio
    import secrets

    from tests.runtime.pg import _admin, with_database

    name = f"a44_test_{secrets.token_hex(6)}"
    asyncio.run(_admin(pg_admin_url, f"create database {name} template {pg_template}"))
    s = Scene(with_database(pg_admin_url, name), tmp_path_factory.mktemp("browser"))
    try:
        yield s
    finally:
        s.close()
        asyncio.run(_admin(pg_admin_url, f"drop database if exists {name} with (force)"))


@pytest.fixture(scope="module")
def browser(scene):
    """After the scene: Playwright's sync API keeps an event loop running in this thread while it is open."""
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser, scene):
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.set_default_timeout(20_000)
    pg.goto(scene.url + "/runs")
    pg.get_by_label("API token").fill(scene.token)
    pg.get_by_role("button", name="Sign in").click()
    pg.wait_for_url(re.compile(r"/runs$"))
    yield pg
    ctx.close()


def test_sign_in_and_out(browser, scene):
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.goto(scene.url + f"/runs/{scene.run_id}")
    assert "/login?next=" in pg.url
    pg.get_by_label("API token").fill("a44_pat_wrong")
    pg.get_by_role("button", name="Sign in").click()
    assert pg.get_by_role("alert").is_visible()
    pg.get_by_label("API token").fill(scene.token)
    pg.get_by_role("button", name="Sign in").click()
    pg.wait_for_url(re.compile(rf"/runs/{scene.run_id}$"))          # back where the operator was going
    cookie = next(c for c in ctx.cookies() if c["name"] == "a44_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert pg.evaluate("document.cookie").find("a44_console=") == -1  # no script can read the token
    pg.get_by_role("button", name="Sign out").click()
    pg.wait_for_url(re.compile(r"/login$"))
    pg.goto(scene.url + "/runs")
    assert "/login?next=" in pg.url
    ctx.close()


def test_a_post_without_the_csrf_token_is_refused(page, scene):
    page.goto(scene.url + f"/runs/{scene.run_id}")
    resp = page.request.post(scene.url + f"/runs/{scene.run_id}/replay",
                             form={"from_step": "charge", "confirm": "1", "request_id": "r-x"}, max_redirects=0)
    assert resp.status == 403 and "E_CSRF_INVALID" in resp.text()
    page.reload()
    assert page.locator("#run-state").inner_text() == "failed"


def test_replay_a_failed_run_and_watch_it_succeed_live(page, scene):
    runs = page.context.new_page()                                       # the list, open beside the run
    runs.goto(scene.url + "/runs?workflow=wf_pay")
    sync_api.expect(runs.locator("#live .state").first).to_have_text("failed")
    runs.evaluate("window.__not_reloaded = true")
    page.goto(scene.url + "/runs?state=failed")
    page.get_by_role("link", name=scene.run_id).click()
    failure = page.locator("#failure")
    assert "charge" in failure.inner_text() and "E_UPSTREAM_400" in failure.inner_text()
    assert "<script>x</script>" in page.locator("#run-input").text_content()    # hostile input shown as text
    scene.far.broken = False                                            # the far side is fixed
    page.get_by_role("button", name="Preview the replay").click()
    assert "dry run" in page.locator("#replay-preview").inner_text()
    page.get_by_role("button", name="Confirm the replay").click()
    page.wait_for_url(re.compile(rf"/runs/{scene.run_id}$"))
    page.evaluate("window.__not_reloaded = true")
    sync_api.expect(page.locator("#run-state")).to_have_text("succeeded", timeout=30_000)
    assert page.evaluate("window.__not_reloaded") is True               # updated in place by the event stream
    assert "epoch 1" in page.locator("#live").inner_text()
    sync_api.expect(runs.locator("#live .state").first).to_have_text("succeeded", timeout=30_000)
    assert runs.evaluate("window.__not_reloaded") is True


def test_redrive_a_dead_letter(page, scene):
    page.goto(scene.url + "/dlq?queue=q_dl")
    page.get_by_role("link", name=scene.dead_letter_id).first.click()
    page.get_by_role("button", name="Preview the redrive of this entry").click()
    assert "1 of 1 would be redriven" in page.locator("#redrive-preview-result").inner_text()
    page.get_by_role("button", name="Redrive 1").click()
    page.wait_for_url(re.compile(r"redriven=1"))


def _typed_while_updates_land(pg, field, text: str, changing, what: str) -> None:
    """Type `text` into `field` key by key while the page updates itself; then wait for one more update of
    `changing` (a live part of the page) to land, and check that the field kept its focus, caret and text."""
    field.click()
    before = changing.inner_text()
    field.press_sequentially(text, delay=60)
    sync_api.expect(changing).not_to_have_text(before, timeout=15_000)      # updates landed while typing
    now = changing.inner_text()
    sync_api.expect(changing).not_to_have_text(now, timeout=15_000)         # and after: the field sat through it
    assert field.input_value() == text, what
    assert pg.evaluate("document.activeElement && document.activeElement.name") == field.get_attribute("name")
    assert pg.evaluate("[document.activeElement.selectionStart, document.activeElement.selectionEnd]") == \
        [len(text), len(text)], what


def test_live_updates_never_touch_a_form_being_edited(page, scene):
    """Issue 25 item 6: a cancel reason typed on a running run's page and the runs filters typed while runs change
    survive the live updates (focus, caret, text), the rest of the page still updates in place, and the cancel
    carries the typed reason."""
    run_id = scene.start_slow_run("live-1")
    runs = page.context.new_page()
    runs.goto(scene.url + "/runs")
    runs.evaluate("window.__not_reloaded = true")
    step_cell = runs.locator("#live tbody tr").first.locator("td").nth(3)           # the run's current step
    _typed_while_updates_land(runs, runs.get_by_label("Workflow"), "wf_sl", step_cell, "the runs filter")
    assert runs.evaluate("window.__not_reloaded") is True

    page.goto(scene.url + f"/runs/{run_id}")
    page.evaluate("window.__not_reloaded = true")
    reason = "upstream is down, see INC-42"
    attempts = page.locator("#attempts-h")
    _typed_while_updates_land(page, page.get_by_label("Cancel, because"), reason, attempts,
                              "the cancel reason")
    assert page.evaluate("window.__not_reloaded") is True
    page.get_by_role("button", name="Cancel the run").click()
    scene.wait(lambda: scene.run(run_id)["state"] == "cancelled", "the run to be cancelled")
    run = scene.run(run_id)
    assert run["cancel_reason"] == reason, run["cancel_reason"]
    runs.get_by_role("button", name="Filter").click()                               # the typed filter applies
    runs.wait_for_url(re.compile(r"workflow=wf_sl"))


def test_a_malformed_run_id_shows_the_consoles_error_page(page, scene):
    """Issue 25 item 8 in the browser: a run path whose id the server's path check refuses shows the console's
    own 404 page (signed in, with its way back), never the REST API's JSON."""
    for path in ("/runs/not%20an%20id", "/runs/" + "x" * 300):
        resp = page.goto(scene.url + path)
        assert resp.status == 404 and resp.headers["content-type"].startswith("text/html"), (path, resp.status)
        assert page.locator("h1 code").inner_text() == "E_RUN_NOT_FOUND", path
        assert page.get_by_role("alert").inner_text() == "no run has that id", path
    page.get_by_role("link", name="Back to the runs").click()
    page.wait_for_url(re.compile(r"/runs$"))
