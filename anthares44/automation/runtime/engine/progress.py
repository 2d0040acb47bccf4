"""Where a run stands, rebuilt from its attempt rows: per step, what happened and what is next.

The interpreter keeps one `Progress` per driven run and updates it as it writes, so the rows in PostgreSQL and
this view never disagree; a worker that takes a run over builds the same view from the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...compiler.ir import NodeIR, WorkflowIR
from ...compiler.retry_policy import counts_against_budget


@dataclass
class Attempt:
    step_id: str
    kind: str                       # action | compensation
    attempt: int
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    error_code: str | None = None
    error_message: str | None = None
    result: Any = None
    retry_at: datetime | None = None

    @classmethod
    def from_row(cls, row, load_result) -> "Attempt":
        result = load_result(dict(row)) if row["status"] == "succeeded" else row["result"]
        return cls(row["step_id"], row["kind"], row["attempt"], row["status"], row["started_at"],
                   row["finished_at"], row["error_code"], row["error_message"], result, row["retry_at"])


@dataclass
class StepProgress:
    node: NodeIR
    actions: list[Attempt] = field(default_factory=list)
    compensations: list[Attempt] = field(default_factory=list)

    @property
    def last(self) -> Attempt | None:
        return self.actions[-1] if self.actions else None

    @property
    def next_attempt(self) -> int:
        return (self.actions[-1].attempt + 1) if self.actions else 1

    @property
    def next_compensation_attempt(self) -> int:
        return (self.compensations[-1].attempt + 1) if self.compensations else 1

    @property
    def counted_failures(self) -> int:
        return sum(1 for a in self.actions if counts_against_budget(a.status, a.error_code))

    @property
    def counted_compensation_failures(self) -> int:
        return sum(1 for a in self.compensations if a.status in ("failed", "compensation_failed"))

    @property
    def state(self) -> str:
        """not_started | running | succeeded | skipped | retry (a due time in retry_at) | interrupted (lease
        expired: try again now) | failed (final)."""
        a = self.last
        if a is None:
            return "not_started"
        if a.status in ("running", "succeeded", "skipped"):
            return a.status
        if a.status == "lease_expired":
            return "interrupted"
        return "retry" if a.retry_at is not None else "failed"

    @property
    def done(self) -> bool:
        return self.state in ("succeeded", "skipped")

    @property
    def output(self) -> Any:
        return self.last.result if self.state == "succeeded" else None


class Progress:
    def __init__(self, ir: WorkflowIR, attempts: list[Attempt], completion_order: list[str]):
        self.ir = ir
        self.steps: dict[str, StepProgress] = {n.id: StepProgress(n) for n in ir.nodes}
        self.preds: dict[str, set[str]] = {n.id: set() for n in ir.nodes}
        self.succs: dict[str, set[str]] = {n.id: set() for n in ir.nodes}
        for a, b in ir.edges:
            self.preds[b].add(a)
            self.succs[a].add(b)
        for a in attempts:
            sp = self.steps.get(a.step_id)
            if sp is not None:
                (sp.actions if a.kind == "action" else sp.compensations).append(a)
        for sp in self.steps.values():
            sp.actions.sort(key=lambda x: x.attempt)
            sp.compensations.sort(key=lambda x: x.attempt)
        self.completion_order = [s for s in completion_order if s in self.steps]

    # --- recording what the interpreter just wrote ---------------------------------------------------------------
    def add(self, a: Attempt) -> None:
        sp = self.steps[a.step_id]
        (sp.actions if a.kind == "action" else sp.compensations).append(a)

    def finished(self, a: Attempt) -> None:
        if a.kind == "action" and a.status == "succeeded":
            self.completion_order.append(a.step_id)

    # --- questions ------------------------------------------------------------------------------------------------
    def ready(self, step_id: str) -> bool:
        return all(self.steps[p].done for p in self.preds[step_id])

    def all_done(self) -> bool:
        return all(sp.done for sp in self.steps.values())

    def failed_step(self) -> StepProgress | None:
        for sp in self.steps.values():
            if sp.state == "failed":
                return sp
        return None

    def latest_finish(self) -> datetime | None:
        """The last instant anything in this epoch finished: the anchor of the next compensation wait."""
        times = [a.finished_at for sp in self.steps.values() for a in (*sp.actions, *sp.compensations)
                 if a.finished_at is not None]
        return max(times) if times else None

    def compensation_plan(self) -> list[StepProgress]:
        """Succeeded steps that declare `compensate`, in reverse completion order (§6.1)."""
        return [self.steps[s] for s in reversed(self.completion_order)
                if self.steps[s].node.compensate is not None and self.steps[s].state == "succeeded"]

    def scope_steps(self) -> dict[str, dict]:
        """`steps` of the template / CEL scope: finished steps' output and status."""
        out = {}
        for sid, sp in self.steps.items():
            if sp.done:
                out[sid] = {"output": sp.output, "status": sp.state}
        return out

    def sink_outputs(self) -> dict[str, Any]:
        """The run's result: outputs of the steps nothing depends on (skipped ones left out)."""
        return {sid: sp.output for sid, sp in self.steps.items() if not self.succs[sid] and sp.state == "succeeded"}

    def summary(self) -> dict:
        """§16: rows in / out / in error summed from results that report them, plus step and attempt counts."""
        totals = {"rows_in": 0, "rows_out": 0, "rows_in_error": 0}
        seen = {k: False for k in totals}
        keys = {"rows_in": ("rowsIn", "rows_in", "itemsIn", "items_in"),
                "rows_out": ("rowsOut", "rows_out", "rowCount", "row_count", "itemsOut", "items_out"),
                "rows_in_error": ("rowsInError", "rows_in_error", "rowsError", "itemsInError", "items_in_error")}
        states: dict[str, int] = {}
        attempts = 0
        for sp in self.steps.values():
            states[sp.state] = states.get(sp.state, 0) + 1
            attempts += len(sp.actions)
            out = sp.output
            if isinstance(out, dict):
                for total, names in keys.items():
                    for name in names:
                        v = out.get(name)
                        if isinstance(v, int) and not isinstance(v, bool):
                            totals[total] += v
                            seen[total] = True
                            break
        summary: dict[str, Any] = {k: (v if seen[k] else None) for k, v in totals.items()}
        summary.update(steps=states, attempts=attempts)
        return summary
