"""Group commit of step transitions across runs: one statement, one transaction, one WAL flush for the
transitions of every run ready at the same moment (docs/runtime.md, "What keeps it fast").

`Batch.commit` (journal.py) hands its encoded operations to the engine's `Committer` and waits. A flusher task
takes everything pending (at most `MAX_GROUP`) and sends it as one `engine_commit_many` call (migration 0021);
while that statement is in flight, new transitions gather for the next one. Up to `MAX_IN_FLIGHT` statements are
in flight at once, each on its own connection: with only one, PostgreSQL (one backend applying a group) and the
daemon (rendering and calling for the runs the last group released) take turns, and neither gets a whole core.
Nothing waits for a timer: an idle engine commits a lone transition at once, so one run at a time is not slowed
down; groups grow only with the load. A run has at most one transition pending (its driver awaits it), so two
statements never carry the same run and each run's transitions stay in order. Each run's transition is applied
in its own subtransaction, in arrival order, and its waiter is released only once the whole statement has
committed, so "attempt row committed before the effect" and "result committed before the step counts as done"
hold per run exactly as with one statement per transition.

A run the group refuses (lease lost, attempt not running, illegal transition) gets the exception it would get
alone; nothing of it is written and the other runs commit. Any other per-run error (a bug in one operation, a
deadlock) is retried alone through `engine_commit`, so it surfaces exactly as it did before group commit. A
failure of the statement itself (PostgreSQL unavailable) fails every waiter of the group with that error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ...errors import E_SYNCHRONOUS_COMMIT, A44Error
from .journal import SIGNALS, Lease, encode_value, write_alone

if TYPE_CHECKING:
    from ...settings import Settings
    from ..store.core import Store

log = logging.getLogger("a44.engine")

# Transitions per statement at most. Each is a subtransaction with its own transaction id, and a backend caches
# 64 of them; past that every snapshot in the cluster has to look subtransactions up in pg_subtrans.
MAX_GROUP = 64
# Group statements in flight at once. Two let PostgreSQL apply one group while the daemon prepares the next; more
# only split the same load into smaller groups (more commits, more WAL flushes) on this kind of machine.
MAX_IN_FLIGHT = 2
# ...and a statement joins one in flight only with at least this many transitions: a smaller group would cost a
# commit of its own for less work than waiting for the one in flight to return.
SECOND_GROUP = 16


def synchronous_commit(settings: Settings) -> bool:
    """A44_SYNCHRONOUS_COMMIT: True (unset or `on`: a transition counts once its WAL is flushed) or False (`off`)."""
    value = (settings.synchronous_commit or "on").strip().lower()
    if value not in ("on", "off"):
        raise A44Error(E_SYNCHRONOUS_COMMIT, f"A44_SYNCHRONOUS_COMMIT={settings.synchronous_commit!r}: use on or off")
    return value == "on"


@dataclass
class _Pending:
    lease: Lease
    ops: str               # the batch's operations, JSON (journal.encode_ops)
    current: str | None
    at: datetime
    future: asyncio.Future
    due_ms: int | None = None      # the run was released to a wait until then: wake the daemons (a44_runs_due)

    def json(self) -> str:
        L = self.lease
        head = dict(run_id=L.run_id, owner=L.owner, grant=L.grant, current_step=self.current, now=self.at)
        if self.due_ms is not None:
            head["due_ms"] = self.due_ms
        head = json.dumps(head, separators=(",", ":"), ensure_ascii=False, default=encode_value)
        return f'{head[:-1]},"ops":{self.ops}}}'


class Committer:
    def __init__(self, store: Store, *, synchronous_commit: bool = True, max_group: int = MAX_GROUP,
                 max_in_flight: int = MAX_IN_FLIGHT, second_group: int = SECOND_GROUP):
        self.store = store
        self.second_group = second_group
        self.max_group = max_group
        self.max_in_flight = max_in_flight
        # None: leave the server's setting alone (on by default); 'off' only when the deployment opted in
        self._synchronous_commit = None if synchronous_commit else "off"
        self._pending: list[_Pending] = []
        self._flushers: list[asyncio.Task] = []      # live flusher tasks, at most max_in_flight
        self._starting: asyncio.Task | None = None    # a flusher created but not yet at its first statement
        self.statements = 0        # statistics (tests, bench): group statements sent, transitions they carried,
        self.transitions = 0       # transitions retried alone after a non-refusal error in the group
        self.alone = 0
        self.in_flight = 0         # group statements on their way now, and the most there ever were at once
        self.peak_in_flight = 0

    async def commit(self, lease: Lease, ops: str, current: str | None, at: datetime,
                     due: datetime | None = None) -> None:
        """Apply one run's transition as part of the next group; returns once that group has committed, with
        its NOTIFYs (the run id; `due`, when the transition released the run to a wait) sent in the same
        transaction (migration 0026). Raises what `write_alone` would: LeaseLost, E_ILLEGAL_TRANSITION, the
        store's A44Error."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append(_Pending(lease, ops, current, at, fut, due_ms(due)))
        self._flushers = [t for t in self._flushers if not t.done() and t.get_loop() is loop]
        # a flusher created but not yet running takes everything pending when it starts: no second one for that
        starting = self._starting
        if len(self._flushers) < self.max_in_flight and (starting is None or starting not in self._flushers) \
                and (not self._flushers or len(self._pending) >= self.second_group):
            self._starting = loop.create_task(self._flush_loop())
            self._flushers.append(self._starting)
        await fut

    async def _flush_loop(self) -> None:
        self._starting = None
        while self._pending:
            group, self._pending = self._pending[:self.max_group], self._pending[self.max_group:]
            group = [p for p in group if not p.future.done()]    # a waiter cancelled before its turn: not sent
            if group:
                await self._flush(group)

    async def _flush(self, group: list[_Pending]) -> None:
        self.statements += 1
        self.transitions += len(group)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            outcomes = await self.store.fetchval("engine_commit_many",
                                                 batches="[" + ",".join(p.json() for p in group) + "]",
                                                 synchronous_commit=self._synchronous_commit)
        except BaseException as exc:  # noqa: BLE001 - nothing of the group was written: every waiter gets it
            for p in group:
                _settle(p.future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            self.in_flight -= 1
        retry = []
        for p, outcome in zip(group, outcomes):
            if outcome is None:
                _settle(p.future, None)
                continue
            signal = SIGNALS.get(outcome.get("sqlstate"))
            if signal is None:
                retry.append(p)
            else:
                _settle(p.future, signal(p.lease, SimpleNamespace(**outcome)))
        if retry:
            self.alone += len(retry)
            await asyncio.gather(*(self._alone(p) for p in retry))

    async def _alone(self, p: _Pending) -> None:
        try:
            await write_alone(self.store, p.lease, p.ops, p.current, p.at)
        except Exception as exc:  # noqa: BLE001 - this run's own failure, raised in its driver
            _settle(p.future, exc)
            return
        _settle(p.future, None)
        try:        # alone, the statement sent no NOTIFY: send them now (hints: a lost one only delays a follower)
            await self.store.fetchval("engine_notify", run_ids=[p.lease.run_id],
                                      due_ms=None if p.due_ms is None else str(p.due_ms))
        except A44Error as exc:
            log.info("notify of %s after its lone commit failed: %s", p.lease.run_id, exc)


def due_ms(due: datetime | None) -> int | None:
    return None if due is None else int(due.timestamp() * 1000)


def _settle(fut: asyncio.Future, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    elif isinstance(exc, Exception):
        fut.set_exception(exc)
    else:       # the flusher itself was cancelled (loop shutdown): so are its waiters
        fut.cancel()
