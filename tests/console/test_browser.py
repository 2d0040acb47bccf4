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
