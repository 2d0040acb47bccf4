"""Group commit for accepted webhooks (docs/webhooks.md, "Performance").

Every accepted request is one execution of the `webhook_ingest` statement. Requests that arrive while earlier ones
are being written wait in a queue; a flusher takes everything queued (at most `MAX_BATCH`) and sends it as one
pipelined `executemany` on one connection: a single round trip and a single implicit transaction, so one commit
(and, with fsync on, one WAL flush, and one NOTIFY commit lock) for the whole batch. Nothing waits for a timer:
an idle server writes a lone request at once; batches grow only with the load. At most `MAX_FLUSHERS` batches are
in flight at a time. Each request's answer is released only when its batch has committed.

A batch is atomic: if any of its statements fails (a deadlock with another writer, a lost connection ...), nothing
of it is written and every request of the batch is retried alone, in its own transaction, so one bad request
cannot fail the others. Statements of a batch run in key order, so two concurrent batches lock the same keys in
the same order.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

MAX_BATCH = 128       # defaults; a process sets its own with tune() (A44_WEBHOOK_MAX_BATCH / _FLUSHERS, settings.py)
MAX_FLUSHERS = 2
STATEMENT = "webhook_ingest"


class GroupCommitter:
    def __init__(self, store, *, max_batch: int = MAX_BATCH, flushers: int = MAX_FLUSHERS):
        self.store, self.max_batch, self.flushers = store, max_batch, flushers
        self._queue: list[tuple[dict[str, Any], asyncio.Future]] = []
        self._active = 0
        self.batches = 0           # statistics (tests, bench)
        self.statements = 0
        self.fallbacks = 0

    async def submit(self, args: dict[str, Any]) -> Any:
        """Run `webhook_ingest` with the named `args` as part of the next batch; its row once the batch has
        committed."""
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((args, fut))
        if self._active < self.flushers:
            self._active += 1
            asyncio.get_running_loop().create_task(self._flush_loop())
        return await fut

    async def _flush_loop(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
                await self._flush(batch)
        finally:
            self._active -= 1

    async def _flush(self, batch: list[tuple[dict[str, Any], asyncio.Future]]) -> None:
        batch.sort(key=lambda item: item[0]["key"])   # the run's idempotency key
        self.batches += 1
        self.statements += len(batch)
        try:
            async with self.store.session(STATEMENT, session_neutral=True) as conn:
                rows = await conn.fetchmany(STATEMENT, [args for args, _ in batch])
        except BaseException as exc:  # noqa: BLE001 - nothing of the batch was written: retry each request alone
            if len(batch) == 1 or isinstance(exc, asyncio.CancelledError):
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            self.fallbacks += 1
            await asyncio.gather(*(self._alone(args, fut) for args, fut in batch))
            return
        for (_, fut), row in zip(batch, rows):
            if not fut.done():
                fut.set_result(row)

    async def _alone(self, args: dict[str, Any], fut: asyncio.Future) -> None:
        try:
            async with self.store.session(STATEMENT, session_neutral=True) as conn:
                row = await conn.fetchrow(STATEMENT, **args)
        except Exception as exc:  # noqa: BLE001 - this request's own failure
            if not fut.done():
                fut.set_exception(exc)
            return
        if not fut.done():
            fut.set_result(row)


_committers: weakref.WeakKeyDictionary[Any, GroupCommitter] = weakref.WeakKeyDictionary()
_tuning: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def tune(store, *, max_batch: int | None = None, flushers: int | None = None) -> None:
    """The batch size and batches in flight of the store's committers from now on (None: the default)."""
    _tuning[store] = {k: v for k, v in (("max_batch", max_batch), ("flushers", flushers)) if v is not None}
    _committers.pop(store, None)


def committer_for(store) -> GroupCommitter:
    """The store's committer for the running event loop (a new one if the loop changed)."""
    loop = asyncio.get_running_loop()
    c = _committers.get(store)
    if c is None or getattr(c, "_loop", None) is not loop:
        c = _committers[store] = GroupCommitter(store, **_tuning.get(store, {}))
        c._loop = loop
    return c
