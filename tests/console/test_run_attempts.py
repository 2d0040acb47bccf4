"""The run page lists a run's attempts with their metadata, a bounded keyset page at a time, and never reads a
result from the object store: one attempt's result is read (and redacted) only when someone opens it."""

from __future__ import annotations

import re

from anthares44.automation.runtime.store.results import MAX_INLINE_BYTES
from tests.runtime.engine_support import PROJECT, node, publish_and_run, workflow

BIG = MAX_INLINE_BYTES + 1000
STORED = (3, 50, 120)          # attempts whose results go to the object store


def attempt_rows(page) -> int:
    return len(re.findall(r'<tr class="attempt', page.text))


async def many_attempts(store, count: int) -> str:
    run_id = await publish_and_run(store, workflow([node("fetch")], name="many"), key="many")
    for n in range(1, count + 1):
        ref = await store.record_attempt_start(run_id, "fetch", n, project=PROJECT)
        result = {"n": n, "password": f"hunter{n}", "pad": "x" * BIG} if n in STORED else {"n": n, "token": "t0k"}
        await store.record_attempt_finish(ref, "failed" if n < count else "succeeded", result=result,
                                          error_code="E_UPSTREAM_503" if n < count else None)
    return run_id


def object_file(root, attempt: int):
    found = list((root / "results").rglob(f"e0-action-a{attempt}.json"))
    assert len(found) == 1, found
    return found[0]


def next_link(page) -> str | None:
    more = re.search(r'<a rel="next" href="([^"]+)"', page.text)
    return more.group(1).replace("&amp;", "&") if more else None


def test_the_run_page_lists_a_bounded_page_of_attempts_without_reading_stored_results(live, writer, tmp_path):
    run_id = live.run(many_attempts(live.store, 130))
    object_file(tmp_path, STORED[0]).unlink()                       # lost: the page must not need it
    object_file(tmp_path, STORED[1]).write_bytes(b"not json at all")  # poisoned likewise
    page = writer.get(f"/runs/{run_id}")
    assert page.status == 200, page.text[:500]
    assert attempt_rows(page) == 100 and "130, 100 on this page" in page.text
    assert "hunter" not in page.text and "t0k" not in page.text   # small inline results are shown redacted
    assert re.search(r'class="node n-succeeded" data-step="fetch"', page.text)  # the latest attempt colours it
    later = writer.get(next_link(page))
    assert later.status == 200 and attempt_rows(later) == 30 and next_link(later) is None
    assert f"/runs/{run_id}/attempt?step=fetch&amp;epoch=0&amp;kind=action&amp;attempt={STORED[2]}" in later.text
    # smaller pages keep the order and list every attempt once
    seen, path = [], f"/runs/{run_id}?limit=40"
    while path:
        got = writer.get(path)
        seen += [int(n) for n in re.findall(r'<td>action</td><td>(\d+)</td>', got.text)]
        path = next_link(got)
        if path and "limit=" not in path:
            path += "&limit=40"
    assert seen == list(range(1, 131))
    assert writer.get(f"/runs/{run_id}?after=garbage").status == 400


def test_one_attempts_result_is_read_on_demand_and_redacted(live, writer, tmp_path):
    run_id = live.run(many_attempts(live.store, 130))
    object_file(tmp_path, STORED[0]).unlink()
    url = f"/runs/{run_id}/attempt?step=fetch&epoch=0&kind=action&attempt="
    intact = writer.get(url + str(STORED[2]))
    assert intact.status == 200 and f'&#34;n&#34;: {STORED[2]}' in intact.text and "xxxx" in intact.text
    assert "hunter" not in intact.text and "[redacted]" in intact.text
    assert intact.headers["content-security-policy"].startswith("default-src 'self'")
    object_file(tmp_path, STORED[1]).write_bytes(b"not json at all")
    for broken in STORED[:2]:
        missing = writer.get(url + str(broken))
        assert missing.status == 404 and "E_RESULT_UNAVAILABLE" in missing.text and "cannot be read" in missing.text
        assert str(tmp_path) not in missing.text                    # the server's files are not named
    small = writer.get(url + "7")
    assert small.status == 200 and '&#34;n&#34;: 7' in small.text and "t0k" not in small.text
    assert writer.get(url + "999").status == 404
    assert writer.get(f"/runs/{run_id}/attempt?step=fetch").status == 400
    assert "Traceback" not in live.log_text()
