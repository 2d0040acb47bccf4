"""A cancel request as the driver of a run sees it (cancels.py records it on the run): whether one was made, the
log message (who and why) and whether to compensate, and the future that ends the driver's wait for its in-flight
calls when a request arrives (the daemon hears of it on channel a44_run_cancel)."""

from __future__ import annotations

import asyncio

from ...errors import E_RUN_CANCELLED, A44Error
from ..store.core import Store


class CancelRequest:
    def __init__(self, asked: bool):
        self.asked = asked           # found on the claimed row (error_code E_RUN_CANCELLED), or told by the daemon
        self.message: str | None = None
        self.compensate = False
        self._wake = asyncio.Event()
        self._waiter: asyncio.Future | None = None

    def ask(self) -> None:
        self.asked = True
        self._wake.set()

    async def load(self, store: Store, run_id: str) -> bool:
        """True when the run is to be cancelled now: who asked and whether to compensate are read once. False
        when nothing was asked, or no request is on the run any more."""
        if self.asked and self.message is None:
            req = await store.fetchrow("run_cancel_request", run_id=run_id)
            if req is None:
                self.asked = False
            else:
                self.message, self.compensate = req["error_message"], bool(req["cancel_compensate"])
        return self.asked

    def error(self, step_id: str | None = None) -> A44Error:
        return A44Error(E_RUN_CANCELLED, self.message or "cancelled", step_id=step_id)

    def waiter(self) -> asyncio.Future | None:
        """What ends a wait for in-flight calls when a request arrives (one for the visit); None once one has."""
        if self.asked:
            return None
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self._wake.wait())
        return self._waiter

    def close(self) -> None:
        if self._waiter is not None:
            self._waiter.cancel()
