"""Whether this process can reach its control store, as its loops find out: the claim loop, the scheduler and the
metrics flusher each report a failed or a successful round here, and the process logs one line when the database
is lost and one when it is back, whatever the number of loops or retries in between (never a line or a traceback
per retry). Keyed by the store's URL: the daemon's pool and its HTTP plane's pool share one state."""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("a44.lifecycle")


class Outage:
    def __init__(self) -> None:
        self._lost_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def failed(self, url: str, what: str, exc: BaseException) -> bool:
        """A round of `what` failed on the database at `url`; True (and one WARNING line) when that is news."""
        with self._lock:
            if url in self._lost_at:
                return False
            self._lost_at[url] = time.monotonic()
        log.warning("database unreachable (%s: %s); retrying with backoff, in-flight work is kept", what,
                    getattr(exc, "message", None) or exc)
        return True

    def ok(self, url: str, began: float) -> bool:
        """A round that `began` (time.monotonic()) succeeded; True (and one INFO line) when the database was lost
        until now. A round that began before the loss was noticed proves nothing: while a server shuts down, a
        statement sent just before can still succeed after another loop failed, and counting it would log the
        outage twice (lost, back, lost)."""
        with self._lock:
            since = self._lost_at.get(url)
            if since is None or began < since:
                return False
            del self._lost_at[url]
        log.info("database reachable again after %.1fs", time.monotonic() - since)
        return True

    def is_lost(self, url: str) -> bool:
        with self._lock:
            return url in self._lost_at


OUTAGE = Outage()
