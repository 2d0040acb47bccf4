"""The `wait` step of a YAML workflow (§20, node kind `wait`, docs/waits.md): a step kind (visit.py `StepKind`)
that waits for a signal sent to the run, or for an event correlated with it (event_waits.py, migration 0035),
holding no worker, lease or slot meanwhile.

The wait is a row (`run_waits`, migration 0033) that leaves `open` exactly once. The first look opens it (its
own short transaction, idempotent: `wait_open` consumes the oldest buffered signal of its name, if any) and, while
it stays open, releases the run to `waiting` until the wait's timeout; the release carries a check
(`engine_op_wait_check`) that makes the run due at once if a signal closed the wait in between. A signal arriving
later closes the wait itself and makes the run due (`run_signal`). The look at or after the timeout closes it
`timed_out` unless it closed first (`wait_timeout`, one conditional update): whichever commits first is the only
outcome, and a signal that comes after a timeout stays buffered, never resumes the step. The step finishes from
the row's outcome in the commit that marks the wait resumed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ...errors import E_RUN_CANCELLED, E_WAIT_TIMEOUT, A44Error
from . import any_waits, event_waits
from .progress import Progress, StepProgress
from .states import WAITING
from .visit import Visit

OPEN, SATISFIED, TIMED_OUT, CANCELLED = "open", "satisfied", "timed_out", "cancelled"


class Wait:
    """`StepKind` of node kind `wait`."""

    async def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime,
                      dues: list[tuple[datetime, str]]) -> bool:
        b, L, w = v.batch, v.lease, sp.node.wait
        assert w is not None
        a = sp.last if sp.state == "running" else None
        if a is None:
            a = b.start(sp.node.id, sp.next_attempt, "action", now)
            p.add(a)
        if w.kind in ("event", "any"):   # their own looks: under the correlation values' locks
            try:
                look = event_waits.look if w.kind == "event" else any_waits.look
                looked = await look(v, p, sp, a.started_at, now)
            except A44Error as err:
                b.wait_resumed(sp.node.id, now)
                b.finish(a, "failed", now, error=err)
                p.finished(a)
                return True
            return self._settled(v, p, sp, a, looked, now, dues)
        # A first look opens the wait; later ones read it back (the open is idempotent: the row of the first open
        # stays, with its timeout instant, whoever looks and however often the visit is repeated).
        row = await v.store.fetchrow("wait_open", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id, kind=w.kind,
                                     key=w.signal, timeout_at=a.started_at + timedelta(milliseconds=w.timeout_ms),
                                     now=now)
        assert row is not None
        if row["state"] == OPEN and now >= row["timeout_at"]:
            row = await v.store.fetchrow("wait_timeout", run_id=L.run_id, epoch=L.epoch, step_id=sp.node.id, now=now)
            assert row is not None
        return self._settled(v, p, sp, a, row, now, dues)

    def _settled(self, v: Visit, p: Progress, sp: StepProgress, a: Any, row: Any, now: datetime,
                 dues: list[tuple[datetime, str]]) -> bool:
        if row["state"] == OPEN:
            dues.append((row["timeout_at"], WAITING))
            return False
        self._finish(v, p, sp, a, row["state"], row["output"], now)
        return True

    def _finish(self, v: Visit, p: Progress, sp: StepProgress, a: Any, state: str, output: Any,
                now: datetime) -> None:
        b, w = v.batch, sp.node.wait
        assert w is not None
        b.wait_resumed(sp.node.id, now)
        if state == SATISFIED:
            b.finish(a, "succeeded", now, result=output)
            v.event("wait.satisfied", step=sp.node.id)
        elif state == TIMED_OUT and w.on_timeout == "continue":
            b.finish(a, "succeeded", now, result={"kind": "timeout"})
            v.event("wait.timed_out", step=sp.node.id)
        elif state == CANCELLED:    # closed by its run ending meanwhile (a cancel, the deadline)
            b.finish(a, "failed", now, error=A44Error(E_RUN_CANCELLED, f"the wait of step {sp.node.id} was closed: "
                                                                       "its run is ending", step_id=sp.node.id))
        else:   # timed out, onTimeout: fail: the step fails for good
            b.finish(a, "failed", now, error=A44Error(
                E_WAIT_TIMEOUT, f"step {sp.node.id} waited {w.timeout_ms} ms for {_what(w)}; none came",
                step_id=sp.node.id, hint="raise the wait's `timeout`, or take `onTimeout: continue` to go on "
                                         f"without the {w.kind if w.kind != 'any' else 'branches'}"))
            v.event("wait.timed_out", step=sp.node.id)
        p.finished(a)


def _what(w: Any) -> str:
    if w.kind == "any":
        return "any of its " + ", ".join(b.kind for b in w.branches)
    return f"signal {w.signal!r}" if w.kind == "signal" else f"a correlated {w.event} event"
