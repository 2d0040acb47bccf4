"""Where a run stands, rebuilt from its attempt rows: per step, what happened and what is next.

The DAG strategy (dag_visit.py) loads one `Progress` per visit before it is built and updates it as it writes, so
the rows in PostgreSQL and this view never disagree; a worker that takes a run over builds the same view from the
same rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...attempts import Attempt, StepAttempts, latest_finish
from ...compiler.ir import NodeIR, WorkflowIR
from ...compiler.row_counts import summary_rows
from ...errors import E_EXPECTATION_FAILED, E_STEP_TIMEOUT


def part_id(step_id: str, partition: str) -> str:
    """The step_id of a partition's attempt rows: `step[partition]` (a step id never holds `[`)."""
    return f"{step_id}[{partition}]"


def split_part(step_id: str) -> tuple[str, str] | None:
    """(step, partition) of a partition's attempt step_id, None for a plain step."""
    i = step_id.find("[")
    if i < 0 or not step_id.endswith("]"):
        return None
    return step_id[:i], step_id[i + 1:-1]


class StepProgress(StepAttempts):
    """A step of the workflow with its attempts."""

    partition: str | None = None
    item: Any = None            # a partition's `foreach` item (PartProgress)

    def __init__(self, node: NodeIR):
        super().__init__()
        self.node = node

    @property
    def key(self) -> str:
        """The step_id of this step's attempt rows."""
        return self.node.id

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


# what `run_partitions.state` shows for a partition, from StepProgress.state and the last attempt's status
_SHOWN = {"not_started": "pending", "running": "running", "succeeded": "success", "skipped": "skipped",
          "retry": "retrying", "interrupted": "retrying"}


class PartProgress(StepProgress):
    """One partition of a fan-out step: the step's node, the partition key and the partition's own attempts."""

    def __init__(self, node: NodeIR, partition: str, ordinal: int = 0):
        super().__init__(node)
        self.partition = partition
        self.ordinal = ordinal
        self.item: Any = partition          # `{{ item }}`: the whole item of a `foreach` (its key otherwise)

    @property
    def key(self) -> str:
        return part_id(self.node.id, self.partition)

    @property
    def shown(self) -> str:
        """pending | running | success | retrying | failed | timeout | skipped (docs/partitions.md)."""
        st = self.state
        if st == "failed":
            timed_out = self.last.status == "timeout" or self.last.error_code == E_STEP_TIMEOUT
            return "timeout" if timed_out else "failed"
        return _SHOWN[st]


class Progress:
    def __init__(self, ir: WorkflowIR, attempts: list[Attempt], completion_order: list[str],
                 rows: dict[str, dict[str, dict]] | None = None, plans: dict[str, list[str]] | None = None,
                 items: dict[str, list] | None = None, plan_epochs: dict[str, int] | None = None):
        self.ir = ir
        self.plans: dict[str, list[str]] = plans or {}      # step id -> its recorded partition keys (0020)
        self.items: dict[str, list] = items or {}           # step id -> its `foreach` items, in order (0038)
        self.plan_epochs: dict[str, int] = plan_epochs or {}  # step id -> the epoch that planned it
        self.rows: dict[str, dict[str, dict]] = rows or {}     # step -> partition -> counts (step_rows)
        self._ancestors: dict[str, set[str]] = {}
        self.steps: dict[str, StepProgress] = {n.id: StepProgress(n) for n in ir.nodes}
        self.parts: dict[str, PartProgress] = {}            # by part_id, every partition with attempts or planned
        self.fanout: dict[str, list[PartProgress]] = {}     # step id -> its partitions in order, once planned
        self.preds: dict[str, set[str]] = {n.id: set() for n in ir.nodes}
        self.succs: dict[str, set[str]] = {n.id: set() for n in ir.nodes}
        for a, b in ir.edges:
            self.preds[b].add(a)
            self.succs[a].add(b)
        for a in attempts:
            sp = self.steps.get(a.step_id) or self._part(a.step_id)
            if sp is not None:
                sp.add(a)
        for sp in (*self.steps.values(), *self.parts.values()):
            sp.sort()
        self.completion_order = [s for s in completion_order if s in self.steps]

    def _part(self, step_id: str) -> PartProgress | None:
        split = split_part(step_id)
        if split is None or split[0] not in self.steps:
            return None
        pp = self.parts.get(step_id)
        if pp is None:
            pp = self.parts[step_id] = PartProgress(self.steps[split[0]].node, split[1])
        return pp

    def plan(self, step_id: str, keys: list[str], items: list | None = None) -> list[PartProgress]:
        """The partitions of fan-out step `step_id`, in order, with the attempts already recorded for them (and
        their items, for a `foreach`)."""
        parts = []
        for i, key in enumerate(keys):
            pp = self._part(part_id(step_id, key))
            assert pp is not None       # step_id is a step of the workflow
            pp.ordinal = i
            if items is not None:
                pp.item = items[i]
            parts.append(pp)
        self.fanout[step_id] = parts
        if items is not None:
            self.items[step_id] = items
        return parts

    def failed_partitions(self) -> list[PartProgress]:
        """Partitions that failed for good, by step then key (the `partial` run's list). From every partition of
        the epoch, not only those planned in this visit: the run may end visits after its fan-out did."""
        failed = [pp for pp in self.parts.values() if pp.state == "failed"]
        return sorted(failed, key=lambda pp: (pp.node.index, pp.partition))

    # --- recording what the interpreter just wrote ---------------------------------------------------------------
    def add(self, a: Attempt) -> None:
        (self.steps.get(a.step_id) or self._part(a.step_id)).add(a)

    def record_rows(self, step_id: str, rows: dict, partition: str = "") -> None:
        self.rows.setdefault(step_id, {})[partition] = rows

    def finished(self, a: Attempt) -> None:
        if a.kind == "action" and a.status == "succeeded" and a.step_id in self.steps:
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
        return latest_finish(self.steps.values())

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

    def ancestors(self, step_id: str) -> set[str]:
        found = self._ancestors.get(step_id)
        if found is None:
            found, stack = set(), list(self.preds[step_id])
            while stack:
                p = stack.pop()
                if p not in found:
                    found.add(p)
                    stack.extend(self.preds[p])
            self._ancestors[step_id] = found
        return found

    def summary(self) -> dict:
        """§16: rows in / out / in error of the steps that succeeded (or failed their expectation: the counts
        explain it), added up as compiler/row_counts.py says, plus step and attempt counts."""
        states: dict[str, int] = {}
        attempts = 0
        counted = []
        for sid, sp in self.steps.items():
            states[sp.state] = states.get(sp.state, 0) + 1
            attempts += len(sp.actions)
            if sp.state == "succeeded" or (sp.state == "failed" and sp.last.error_code == E_EXPECTATION_FAILED):
                counted.append(sid)
        summary: dict[str, Any] = summary_rows(self.rows, counted, self.ancestors)
        summary.update(steps=states, attempts=attempts)
        return summary
