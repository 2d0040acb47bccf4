"""What a replay (§13) of one run reuses and what it runs again: pure functions of the run's recorded attempts
(its current epoch) and the workflow's IR. No database, no effect: `--dry-run` is exactly these functions.

- `--from-step S`: S and every step after it in the DAG (its descendants) are invalidated. For a code workflow
  (§12) "after" is the recorded order of the run: S and every step recorded after it.
- `--from-time T`: steps whose result was recorded after T are invalidated (and, for safety, their descendants).
- `--failed-partitions`: fan-out steps with a partition that did not succeed (nor was skipped) and their
  descendants are invalidated, but every succeeded or skipped partition of those steps is reused: only the
  failed partitions run again (docs/partitions.md).
- Every other step whose last attempt succeeded (or was skipped by its `if` or a person) is reused: its result is
  read from the log. Steps that never succeeded are run again whatever the cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...attempts import Attempt
from ...compiler.ir import WorkflowIR
from ...errors import E_REPLAY_UNKNOWN_STEP, E_REPLAY_VERSION_MISMATCH, A44Error
from ..engine.progress import split_part

CTX_PREFIX = "ctx."          # recorded ctx.now()/ctx.random() values of code workflows (not steps)


@dataclass(frozen=True)
class Cut:
    from_step: str | None = None
    from_time: datetime | None = None
    failed_partitions: bool = False

    def describe(self) -> dict:
        doc = {"fromStep": self.from_step, "fromTime": self.from_time.isoformat() if self.from_time else None}
        if self.failed_partitions:
            doc["failedPartitions"] = True
        return doc


@dataclass
class RunPlan:
    run_id: str
    reused: list[str] = field(default_factory=list)      # in recorded completion order
    replayed: list[str] = field(default_factory=list)    # in workflow (or recorded) order

    def key(self) -> tuple:
        return tuple(self.reused), tuple(self.replayed)


def descendants(ir: WorkflowIR, step_id: str) -> set[str]:
    succ: dict[str, set[str]] = {n.id: set() for n in ir.nodes}
    for a, b in ir.edges:
        succ[a].add(b)
    out, todo = set(), [step_id]
    while todo:
        s = todo.pop()
        for nxt in succ.get(s, ()):
            if nxt not in out:
                out.add(nxt)
                todo.append(nxt)
    return out


def _last_actions(attempts: list[Attempt]) -> dict[str, Attempt]:
    last: dict[str, Attempt] = {}
    for a in attempts:
        if a.kind != "action":
            continue
        cur = last.get(a.step_id)
        if cur is None or a.attempt >= cur.attempt:
            last[a.step_id] = a
    return last


def _done(a: Attempt | None) -> bool:
    return a is not None and a.status in ("succeeded", "skipped")


def recorded_order(attempts: list[Attempt]) -> list[str]:
    """Step ids (and ctx entries) in the order the run first recorded them (log order)."""
    seen: dict[str, None] = {}
    for a in sorted(attempts, key=lambda a: (a.seq if a.seq is not None else 1 << 62, a.started_at)):
        if a.kind == "action" and a.step_id not in seen:
            seen[a.step_id] = None
    return list(seen)


def plan_run(run_id: str, ir: WorkflowIR, attempts: list[Attempt], cut: Cut) -> RunPlan:
    if ir.kind == "code":
        return _plan_code(run_id, attempts, cut)
    ids = [n.id for n in ir.nodes]
    if cut.from_step is not None and cut.from_step not in ids:
        raise A44Error(E_REPLAY_UNKNOWN_STEP, f"workflow {ir.workflow_id} v{ir.version} has no step "
                                              f"{cut.from_step!r}", hint=f"its steps: {', '.join(ids)}")
    last = _last_actions(attempts)
    invalid: set[str] = set()
    if cut.from_step is not None:
        invalid |= {cut.from_step} | descendants(ir, cut.from_step)
    if cut.from_time is not None:
        late = {s for s, a in last.items() if a.finished_at is not None and a.finished_at > cut.from_time}
        for s in late:
            invalid |= {s} | descendants(ir, s)
    parts: list[str] = []
    if cut.failed_partitions:
        fanned = {n.id for n in ir.nodes if n.partitions is not None}
        by_step: dict[str, list[str]] = {}
        for s in last:
            split = split_part(s)
            if split is not None and split[0] in fanned:
                by_step.setdefault(split[0], []).append(s)
        for step, keys in by_step.items():
            if not all(_done(last[k]) for k in keys):
                invalid |= {step} | descendants(ir, step)
        parts = [k for step, keys in by_step.items() if step in invalid for k in keys if _done(last[k])]
    keep = {s for s in ids if s not in invalid and _done(last.get(s))}
    order = recorded_order([a for a in attempts if a.status in ("succeeded", "skipped")])
    reused = [s for s in order if s in keep] + [s for s in ids if s in keep and s not in order]
    return RunPlan(run_id, reused + parts, [s for s in ids if s not in keep])


def _plan_code(run_id: str, attempts: list[Attempt], cut: Cut) -> RunPlan:
    """Code workflows: the recorded sequence is the order; everything from the cut on is invalidated."""
    order = recorded_order(attempts)
    last = _last_actions(attempts)
    cut_at = len(order)
    if cut.from_step is not None and cut.from_step in order:
        cut_at = order.index(cut.from_step)
    if cut.from_time is not None:
        for i, s in enumerate(order):
            a = last.get(s)
            if a is not None and a.finished_at is not None and a.finished_at > cut.from_time:
                cut_at = min(cut_at, i)
                break
    if cut.failed_partitions:
        # every map item with a result is reused; the code re-runs from the first step (or map) with a failed item
        bad = [i for i, s in enumerate(order) if split_part(s) is not None and not _done(last.get(s))]
        cut_at = min(cut_at, bad[0]) if bad else cut_at
    reused: list[str] = []
    for s in order[:cut_at]:
        if not _done(last.get(s)):
            break           # the code re-runs from the first step without a result on
        reused.append(s)
    if cut.failed_partitions:
        reused += [s for s in order[len(reused):] if split_part(s) is not None and _done(last.get(s))]
    replayed = [s for s in order if s not in reused and not s.startswith(CTX_PREFIX)]
    if cut.from_step is not None and cut.from_step not in replayed and cut.from_step not in reused:
        replayed.append(cut.from_step)
    return RunPlan(run_id, reused, replayed)


def _node_doc(ir: WorkflowIR, step_id: str) -> dict:
    doc = ir.node(step_id).model_dump(mode="json", exclude={"index"})
    doc["needs"] = sorted(a for a, b in ir.edges if b == step_id)
    return doc


def check_version(old: WorkflowIR, new: WorkflowIR, plans: list[RunPlan], cut: Cut) -> None:
    """`--to-version N`: proves the steps before the cut are unchanged between the version a run started on and
    N (same node IR, same predecessors); otherwise E_REPLAY_VERSION_MISMATCH naming the step."""
    if old.kind == "code" or new.kind == "code":
        if old.sha256 == new.sha256:
            return
        raise A44Error(E_REPLAY_VERSION_MISMATCH,
                       f"cannot prove that {new.workflow_id} v{new.version} runs the recorded steps of v{old.version} "
                       f"unchanged: code workflows are compared by source hash, and it differs",
                       hint="replay on the version the runs started on (omit --to-version)")
    before: set[str] = set()
    for p in plans:
        before.update(p.reused)
    if cut.from_step is not None:
        if cut.from_step not in {n.id for n in new.nodes}:
            raise A44Error(E_REPLAY_UNKNOWN_STEP, f"{new.workflow_id} v{new.version} has no step {cut.from_step!r}")
        invalid = {cut.from_step} | descendants(new, cut.from_step)
        before.update(n.id for n in new.nodes if n.id not in invalid)
    new_ids = {n.id for n in new.nodes}
    old_ids = {n.id for n in old.nodes}
    for s in sorted(before):
        if s not in new_ids or s not in old_ids:
            where = f"v{new.version}" if s not in new_ids else f"v{old.version}"
            raise A44Error(E_REPLAY_VERSION_MISMATCH, f"step {s} is before the cut but does not exist in {where}",
                           hint="choose a cut before the change, or replay on the version the runs started on")
        if _node_doc(old, s) != _node_doc(new, s):
            raise A44Error(E_REPLAY_VERSION_MISMATCH,
                           f"step {s} is before the cut and changed between v{old.version} and v{new.version}: its "
                           f"recorded result cannot be reused on v{new.version}",
                           hint=f"cut at or before {s} (--from-step {s}), or omit --to-version")


def step_durations(ir: WorkflowIR, attempts_by_run: dict[str, list[Attempt]]) -> dict[str, float]:
    """Mean recorded duration per step (successful attempts preferred, else any finished one); sleeps use
    their declared length."""
    ok: dict[str, list[float]] = {}
    anyf: dict[str, list[float]] = {}
    for attempts in attempts_by_run.values():
        for a in attempts:
            if a.kind != "action" or a.duration_s is None or a.status == "skipped":
                continue
            anyf.setdefault(a.step_id, []).append(a.duration_s)
            if a.status == "succeeded":
                ok.setdefault(a.step_id, []).append(a.duration_s)
    out = {s: sum(v) / len(v) for s, v in anyf.items()}
    out.update({s: sum(v) / len(v) for s, v in ok.items()})
    for n in ir.nodes:
        if n.kind == "sleep" and n.sleep_ms:
            out[n.id] = n.sleep_ms / 1000
    return out


def run_seconds(ir: WorkflowIR, plan: RunPlan, durations: dict[str, float]) -> float:
    """Estimated wall time of one replayed run: the longest path through the replayed steps of the DAG (for a
    code workflow, the sum of its replayed steps)."""
    if ir.kind == "code":
        return sum(durations.get(s, 0.0) for s in plan.replayed)
    todo = set(plan.replayed)
    preds: dict[str, list[str]] = {n.id: [] for n in ir.nodes}
    for a, b in ir.edges:
        preds[b].append(a)
    finish: dict[str, float] = {}
    for n in ir.nodes:     # nodes are in a topological (written) order
        start = max((finish.get(p, 0.0) for p in preds[n.id]), default=0.0)
        finish[n.id] = start + (durations.get(n.id, 0.0) if n.id in todo else 0.0)
    return max(finish.values(), default=0.0)


def summarize(plans: list[RunPlan]) -> tuple[RunPlan | None, list[RunPlan]]:
    """The plan most runs share (printed as `perRun`) and the runs whose plan differs."""
    if not plans:
        return None, []
    counts: dict[tuple, int] = {}
    for p in plans:
        counts[p.key()] = counts.get(p.key(), 0) + 1
    top = max(counts, key=lambda k: counts[k])
    common = next(p for p in plans if p.key() == top)
    return common, [p for p in plans if p.key() != top]


def per_run_doc(plan: RunPlan | None) -> dict[str, Any]:
    if plan is None:
        return {"reused": [], "replayed": []}
    return {"reused": [s for s in plan.reused if not s.startswith(CTX_PREFIX)], "replayed": list(plan.replayed)}
