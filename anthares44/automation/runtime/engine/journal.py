"""The interpreter's writes: one `Batch` per step transition, committed as one transaction.

A batch collects what a transition writes (finish attempt N, start attempt N+1 of the next steps, skip steps,
change the run's state, append an alert) and commits it in one transaction that first passes the lease fence
(`run_fence`): a worker whose lease was re-granted writes nothing and gets `LeaseLost`. Keeping a transition
to one commit is what keeps commits per run low (docs/runtime.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...errors import A44Error
from ..queries import sql
from ..results import encode_json
from ..store import Store
from .progress import Attempt
from .states import allowed_from, illegal


class LeaseLost(Exception):
    """The run's lease is no longer ours (expired and re-granted, or released): stop touching the run."""


@dataclass(frozen=True)
class Lease:
    run_id: str
    project_id: str
    workflow_id: str
    owner: str
    grant: int
    epoch: int


class Batch:
    def __init__(self, store: Store, lease: Lease, worker_id: str):
        self.store = store
        self.lease = lease
        self.worker_id = worker_id
        self._ops: list[tuple[str, tuple]] = []
        self.current_step: str | None = None
        self.transition_to: str | None = None

    def __bool__(self) -> bool:
        return bool(self._ops) or self.current_step is not None

    def _key(self, step_id: str, kind: str) -> str:
        # §2: every attempt of a step hands the connector the same key; a compensation gets its own
        base = f"{self.lease.run_id}:{step_id}"
        return base if kind == "action" else base + ":compensate"

    # --- attempts ---------------------------------------------------------------------------------------------
    def start(self, step_id: str, attempt: int, kind: str, at: datetime) -> Attempt:
        L = self.lease
        self._ops.append(("engine_attempt_start", (L.run_id, step_id, attempt, self._key(step_id, kind), at, L.epoch,
                                                   kind, L.project_id, self.worker_id, L.grant)))
        if kind == "action":
            self.current_step = step_id
        return Attempt(step_id, kind, attempt, "running", at)

    def finish(self, a: Attempt, status: str, at: datetime, *, result: Any = None, error: A44Error | None = None,
               retry_at: datetime | None = None) -> Attempt:
        L = self.lease
        stored = self.store.results.store(result, project_id=L.project_id, run_id=L.run_id, step_id=a.step_id,
                                          epoch=L.epoch, kind=a.kind, attempt=a.attempt)
        code, message = (error.code, error.message) if error else (None, None)
        self._ops.append(("engine_attempt_finish", (L.run_id, a.step_id, L.epoch, a.kind, a.attempt, a.started_at,
                                                    status, code, message, stored.inline, stored.ref, stored.size,
                                                    at, retry_at)))
        a.status, a.finished_at, a.error_code, a.error_message, a.retry_at = status, at, code, message, retry_at
        a.result = result
        return a

    def record(self, step_id: str, attempt: int, kind: str, status: str, at: datetime, *,
               error: A44Error | None = None, result: Any = None) -> Attempt:
        """An attempt that starts and ends at once: `skipped`, or failed before anything ran."""
        L = self.lease
        text = None if result is None else encode_json(result)
        code, message = (error.code, error.message) if error else (None, None)
        self._ops.append(("engine_attempt_record", (L.run_id, step_id, attempt, self._key(step_id, kind), at,
                                                    L.epoch, kind, L.project_id, self.worker_id, L.grant, status,
                                                    code, message, text, None if text is None else len(text.encode()))))
        return Attempt(step_id, kind, attempt, status, at, at, code, message, result)

    # --- the run ----------------------------------------------------------------------------------------------
    def transition(self, to: str, at: datetime, *, next_wake_at: datetime | None = None, release: bool = False,
                   failed_step: str | None = None, error: A44Error | None = None, result: Any = None,
                   summary: Any = None, finished: bool = False) -> None:
        L = self.lease
        code, message = (error.code, error.message) if error else (None, None)
        self._ops.append(("run_transition", (L.run_id, L.owner, L.grant, to, allowed_from(to), next_wake_at, release,
                                             failed_step, code, message,
                                             None if result is None else encode_json(result),
                                             None if summary is None else encode_json(summary), finished, at)))
        self.transition_to = to

    def event(self, kind: str, at: datetime, *, state: str | None = None, step_id: str | None = None,
              error_code: str | None = None, message: str | None = None, data: Any = None) -> None:
        L = self.lease
        self._ops.append(("run_event_append", (L.run_id, L.project_id, at, kind, state, step_id, None, None,
                                               error_code, message, None if data is None else encode_json(data))))

    # --- commit -----------------------------------------------------------------------------------------------
    async def commit(self, at: datetime) -> None:
        """One transaction: the fence, then every collected write in order. Raises LeaseLost when the lease is
        not ours, E_ILLEGAL_TRANSITION when the state machine refuses the change (nothing is written then)."""
        if not self:
            return
        L = self.lease
        ops, self._ops = self._ops, []
        current, self.current_step = self.current_step, None
        async with self.store.transaction("engine_commit") as conn:
            state = await conn.fetchval(sql("run_fence"), L.run_id, L.owner, L.grant, current, at)
            if state is None:
                raise LeaseLost(L.run_id)
            for name, args in ops:
                row = await conn.fetchrow(sql(name), *args)
                if name == "engine_attempt_finish" and row is None:
                    raise LeaseLost(f"{L.run_id}: attempt {args[4]} of {args[1]} is not running any more")
                if name == "run_transition" and row["new_state"] is None:
                    if row["prev_state"] is None:
                        raise LeaseLost(L.run_id)
                    raise illegal(L.run_id, row["prev_state"], args[3])
                if name == "run_transition":
                    state = row["new_state"]
