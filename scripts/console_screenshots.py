"""Screenshots of each page of the web console at 1280 and 390 px wide, written to docs/console/ (docs/console.md
shows them). A throwaway embedded PostgreSQL, a real `a44 automation serve`, a failed run, a replay preview, a
dead letter, a partitioned run with a failed day and a schedule with a DST shift; Debian's headless chromium.

    .venv/bin/python scripts/console_screenshots.py [--out docs/console]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port  # noqa: E402
from anthares44.automation.runtime.store.core import Store  # noqa: E402
from tests.console.browser_support import CHROMIUM, Scene  # noqa: E402
from tests.partitions.support import ThreadedDailyApi, daily_yaml  # noqa: E402
from tests.runtime.engine_support import PROJECT  # noqa: E402

WIDTHS = {"wide": (1280, 860), "phone": (390, 844)}
SCHEDULE = """\
name: march-report
version: 1
trigger:
  cron: "30 2 * 3 0"
  tz: Europe/Berlin
  dstPolicy: run-once
steps:
  - id: only
    uses: pass
    timeout: 2s
"""


def extra_project(root: Path, api_url: str) -> list[str]:
    (root / "workflows").mkdir(parents=True)
    (root / "workflows" / "daily.yaml").write_text(daily_yaml(api_url))
    (root / "workflows" / "report.yaml").write_text(SCHEDULE)
    return [str(root)]


async def publish_and_start(url: str, paths: list[str]) -> None:
    from anthares44.automation.app.publishing import publish

    store = await Store.connect(url, min_size=1, max_size=2)
    try:
        report = await publish(store, PROJECT, paths)
        assert report.ok, [d.to_dict() for d in report.diagnostics]
        await store.create_run(PROJECT, "wf_daily_load", {"from": "2026-07-01", "to": "2026-07-08"}, "daily-1")
    finally:
        await store.close()


def shoot(scene: Scene, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        for label, (w, h) in WIDTHS.items():
            ctx = browser.new_context(viewport={"width": w, "height": h}, color_scheme="light")
            page = ctx.new_page()

            def snap(name: str, label=label, page=page):
                path = out / f"{name}-{label}.png"
                page.screenshot(path=str(path))
                written.append(path)
            page.goto(scene.url + "/runs")
            snap("login")
            page.get_by_label("API token").fill(scene.token)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/runs")
            snap("runs")
            page.goto(scene.url + f"/runs/{scene.run_id}")
            snap("run")
            page.get_by_role("button", name="Preview the replay").click()
            page.locator("#replay-preview").scroll_into_view_if_needed()
            snap("run-replay-preview")
            page.goto(scene.url + "/partitions?workflow=wf_daily_load")
            snap("partitions")
            page.goto(scene.url + "/dlq?queue=q_dl")
            snap("dlq")
            page.goto(scene.url + f"/dlq/entries/{scene.dead_letter_id}")
            snap("dlq-entry")
            page.goto(scene.url + "/schedules")
            snap("schedules")
            page.goto(scene.url + "/alerts")
            snap("alerts")
            ctx.close()
        browser.close()
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "console"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="a44-shots-"))
    server = EmbeddedServer(tmp / "pg", durable=False)
    server.initdb()
    port = free_port()
    server.start(port)
    api = ThreadedDailyApi()
    api.reject.add("2026-07-05")
    scene = None
    try:
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        scene = Scene(url, tmp)
        asyncio.run(publish_and_start(url, extra_project(tmp / "proj", api.url)))
        time.sleep(3)     # the daemon runs the partitioned run (one day fails: partial)
        for path in shoot(scene, out):
            print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KB")
    finally:
        if scene is not None:
            scene.close()
        api.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
