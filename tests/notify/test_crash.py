"""`kill -9` of a real `a44 automation serve` while notifications are being sent: after a restart every
notification reaches the receiver (deduplicated by key, none is missing), the ones whose row said delivered before
the kill are never sent again, and a send cut short is sent again with the same key."""

from __future__ import annotations

import asyncio
from collections import Counter

from anthares44.automation.clock import SystemClock
from anthares44.automation.runtime.notify import channels, outbox
from anthares44.automation.runtime.store.core import Store
from tests.notify.conftest import PAYLOAD, PROJECT, SECRET
from tests.notify.receivers import HttpReceiver
from tests.runtime.daemon_support import ServeProcess, wait_until
from tests.runtime.pg import query

N = 30


async def _seed(url: str, hook: str) -> None:
    store = await Store.connect(url, clock=SystemClock())
    try:
        await channels.create(store, PROJECT, "squad-billing", "webhook", {"url": hook, "secretRef": "sec_hook"})
        for i in range(N):
            await outbox.enqueue(store, PROJECT, "squad-billing", idempotency_key=f"alr_{i}:firing", kind="firing",
                                 severity="p2", payload=PAYLOAD)
    finally:
        await store.close()


def _delivered(url: str) -> set[str]:
    return {r["idempotency_key"] for r in query(url, "select idempotency_key from automation.notifications "
                                                     "where delivered_at is not null")}


def test_kill_9_mid_send_loses_nothing_and_never_resends_a_delivered_one(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("A44_SECRET_SEC_HOOK", SECRET)
    monkeypatch.setenv("A44_NOTIFY_TIMEOUT", "3s")        # lease: 7 s
    receiver = HttpReceiver(secret=SECRET, delay=1.5)     # every send is in flight for 1.5 s
    asyncio.run(_seed(pg_url, receiver.hook))
    home = tmp_path / "home"
    home.mkdir()
    first = ServeProcess(pg_url, home, worker_id="d1")
    second = None
    try:
        # the first batch (16) is delivered, the second (14) is in flight: then the daemon dies
        wait_until(lambda: len(receiver.requests) > 16 and _delivered(pg_url), 60, "a second batch in flight")
        first.kill9()
        delivered_before = _delivered(pg_url)
        seen_before = Counter(receiver.keys())
        assert 0 < len(delivered_before) < N
        second = ServeProcess(pg_url, home, worker_id="d2")
        wait_until(lambda: len(_delivered(pg_url)) == N, 60, "every notification delivered after the restart")
        seen = Counter(receiver.keys())
        assert set(seen) == {f"alr_{i}:firing" for i in range(N)}                # none lost
        assert all(r["verified"] for r in receiver.requests)
        for key in delivered_before:                                             # never sent again
            assert seen[key] == seen_before[key] == 1, key
        resent = {k for k, n in seen.items() if n > 1}
        assert resent and not resent & delivered_before       # cut short mid-send: sent again with the same key
        assert "Traceback" not in second.output()
        assert second.term() == 0
    finally:
        first.stop()
        if second is not None:
            second.stop()
        receiver.close()
