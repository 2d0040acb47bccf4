"""The console's run page in a real headless Chromium against a real `serve` (the console tests' scene): a run that
waits on an approval says so and who may decide; an approver signed in with an `automation:approve` token (no write
rights) gets the decision form, and their Approve resumes the run; the audit records it `via` console."""

from __future__ import annotations

import re
from datetime import timedelta

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.ingestion.tokens import create_token
from tests.approvals.support import approval_node, audit
from tests.console.test_browser import CHROMIUM, browser, scene, sync_api  # noqa: F401 - fixtures, skips
from tests.runtime.engine_support import PROJECT, node, workflow


def test_an_approver_decides_on_the_run_page(browser, scene):  # noqa: F811 - the fixtures
    ir = workflow([approval_node(groups=("finance-leads",)), node("after", uses="pass", params={"output": 1})],
                  name="console_approval")

    async def setup(store):
        await store.fetchval("approver_groups_store", project=PROJECT, name="finance-leads",
                             members=["ana", "oncall"], now=store.clock.now())
        await store.publish_version(PROJECT, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        run = await store.create_run(PROJECT, ir.workflow_id, {}, "console-approval", initiator="oncall")
        tok = await create_token(store, PROJECT, "ana", ["automation:approve"], timedelta(days=1), None)
        return run.run_id, tok.token
    run_id, token = scene._call(setup)
    scene.wait(lambda: scene.run(run_id)["state"] == "waiting", "the run to wait on its approval")

    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        pg.set_default_timeout(20_000)
        pg.goto(scene.url + f"/runs/{run_id}")
        pg.get_by_label("API token").fill(token)
        pg.get_by_role("button", name="Sign in").click()
        pg.wait_for_url(re.compile(rf"/runs/{run_id}$"))
        box = pg.locator("#approval-sign-off")
        assert "Waiting on the approval of sign-off" in box.inner_text()
        assert "ana, oncall" in box.inner_text()
        pg.locator("#approve-form input[name=comment]").fill("fine by me")
        pg.locator("#approve-form button[value=approve]").click()
        pg.wait_for_url(re.compile(rf"/runs/{run_id}$"))
        scene.wait(lambda: scene.run(run_id)["state"] == "succeeded", "the approved run to finish")
    finally:
        ctx.close()

    async def decisions(store):
        return await audit(store, run_id)
    assert [(d["person"], d["decision"], d["via"], d["comment"]) for d in scene._call(decisions)] == [
        ("ana", "approve", "console", "fine by me")]
