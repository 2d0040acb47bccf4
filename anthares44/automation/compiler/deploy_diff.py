"""The deploy plan's diff (§23, docs/deploys.md): where an open run of an older version stands, and what moving it
to a newer version would mean. Pure functions over two WorkflowIRs and the run's attempt statuses; no store.

A step is compared by id and by its content hash (the node's IR without `id` and `index`). A run is
`compatible` when its completed steps and its frontier (the steps it is in: running, parked in a sleep, wait,
approval or child, or retrying) are unchanged and every new step lies after the frontier or on a branch not taken;
`mappable` when what differs is covered by the new version's `migrate:` block (its `from` lists the run's
version); `blocked` when a completed or parked step was removed or changed kind, a parked step's wait, sleep,
approval or child shape changed, or a difference is not covered. `Move` is what the mover writes for a run that
may move: renamed step ids, new steps to record skipped, outputs to rewrite, and the steps that would run again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .ir import MigrateIR, NodeIR, WorkflowIR, canonical_json

COMPATIBLE, MAPPABLE, BLOCKED = "compatible", "mappable", "blocked"
DONE = ("succeeded", "skipped")
PARKED_KINDS = ("sleep", "wait", "approval", "child")   # a parked step of these kinds is bound to its shape
UNSETTLED_STATES = {"compensating": "is compensating", "awaiting_confirmation": "awaits a person's confirmation"}


def step_hash(node: NodeIR) -> str:
    """The content hash of a step: its IR without its id and position."""
    body = node.model_dump(mode="json", exclude={"id", "index"})
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


@dataclass(frozen=True)
class Stand:
    """Where a run stands: its completed steps and the steps it is in (the frontier), by step id."""
    run_id: str
    version: int
    state: str
    completed: frozenset[str]
    active: frozenset[str]


def stand_of(run_id: str, version: int, state: str, attempts: Iterable[tuple[str, str, str]]) -> Stand:
    """A run's `Stand` from its attempts of the current epoch, `(step_id, kind, status)` in start order: a step is
    completed when its last action ended succeeded or skipped, active when it has attempts otherwise; a partition's
    attempts (`step[key]`) make their step active until the step itself is done."""
    last: dict[str, str] = {}
    parts: set[str] = set()
    for step_id, kind, status in attempts:
        if kind != "action":
            continue
        i = step_id.find("[")
        if i > 0 and step_id.endswith("]"):
            parts.add(step_id[:i])
            continue
        last[step_id] = status
    completed = frozenset(s for s, st in last.items() if st in DONE)
    active = frozenset((set(last) | parts) - completed)
    return Stand(run_id, version, state, completed, active)


@dataclass(frozen=True)
class Reason:
    step: str | None
    outcome: str            # mappable | blocked
    code: str               # removed | renamed | changed | kind_changed | shape_changed | added_before_frontier ...
    message: str
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "class": self.outcome, "code": self.code, "message": self.message,
                "hint": self.hint}


@dataclass
class Move:
    """What moving a run writes (runtime/run_moves.py)."""
    renames: dict[str, str] = field(default_factory=dict)        # completed old id -> new id
    skip_added: list[str] = field(default_factory=list)          # new steps before the frontier, recorded skipped
    outputs: dict[str, Any] = field(default_factory=dict)        # new id -> Expr over `output`
    reexecute: list[str] = field(default_factory=list)           # completed steps the new version runs again

    def to_dict(self) -> dict[str, Any]:
        return {"renames": self.renames, "skip_added": self.skip_added, "outputs": sorted(self.outputs),
                "reexecute": self.reexecute}


@dataclass
class RunPlan:
    stand: Stand
    outcome: str
    reasons: list[Reason]
    move: Move

    @property
    def first_difference(self) -> str | None:
        return self.reasons[0].step if self.reasons else None

    def to_dict(self) -> dict[str, Any]:
        s = self.stand
        return {"run_id": s.run_id, "version": s.version, "state": s.state, "class": self.outcome,
                "first_difference": self.first_difference, "reasons": [r.to_dict() for r in self.reasons],
                "completed": sorted(s.completed), "frontier": sorted(s.active), "move": self.move.to_dict()}


def version_diff(old: WorkflowIR, new: WorkflowIR) -> dict[str, Any]:
    """What changed between two versions, by step id and content hash (`renamed`: the new version's `migrate:`
    renames, and same-content steps under another id as `looks_renamed`)."""
    o, n = {x.id: x for x in old.nodes}, {x.id: x for x in new.nodes}
    changed = [s for s in n if s in o and step_hash(n[s]) != step_hash(o[s])]
    removed = [s for s in o if s not in n]
    added = [s for s in n if s not in o]
    by_hash: dict[str, str] = {}
    for s in added:                     # the first new step of that content, in file order
        by_hash.setdefault(step_hash(n[s]), s)
    looks = {s: by_hash[step_hash(o[s])] for s in removed if step_hash(o[s]) in by_hash}
    mig = _covering(new.migrate, old.version)
    return {"from": old.version, "to": new.version, "added": added, "removed": removed, "changed": changed,
            "kind_changed": [s for s in changed if n[s].kind != o[s].kind],
            "renamed": dict(mig.rename) if mig else {}, "looks_renamed": looks,
            "migrate_covers": mig is not None}


def _covering(m: MigrateIR | None, version: int) -> MigrateIR | None:
    return m if m is not None and version in m.from_versions else None


def _ancestors(ir: WorkflowIR, steps: Iterable[str]) -> set[str]:
    preds: dict[str, set[str]] = {n.id: set() for n in ir.nodes}
    for a, b in ir.edges:
        preds[b].add(a)
    found: set[str] = set()
    stack = [p for s in steps if s in preds for p in preds[s]]
    while stack:
        p = stack.pop()
        if p not in found:
            found.add(p)
            stack.extend(preds[p])
    return found


def classify(old: WorkflowIR, new: WorkflowIR, stand: Stand, *, allow_reexecute: bool = False) -> RunPlan:
    """The class of one open run of `old` if it moved to `new` (see the module docstring), with every reason in
    step order and the `Move` that would carry it out."""
    reasons: list[Reason] = []
    move = Move()

    def add(step: str | None, outcome: str, code: str, message: str, hint: str | None = None) -> None:
        reasons.append(Reason(step, outcome, code, message, hint))

    if old.kind == "code" or new.kind == "code":
        add(None, BLOCKED, "code", f"{new.workflow_id} is a code workflow: the plan diffs YAML steps",
            "check code workflows with `a44 automation verify FILE --histories ...`")
        return RunPlan(stand, BLOCKED, reasons, move)
    if stand.state in UNSETTLED_STATES:
        add(None, BLOCKED, "unsettled", f"the run {UNSETTLED_STATES[stand.state]}", "settle it, then plan again")
    mig = _covering(new.migrate, stand.version)
    rename = dict(mig.rename) if mig else {}
    removed = dict(mig.removed) if mig else {}
    o, n = {x.id: x for x in old.nodes}, {x.id: x for x in new.nodes}
    hint_from = f"a `migrate:` block with `from: [{stand.version}]`"
    new_hashes: dict[str, str] = {}
    for x in new.nodes:
        if x.id not in o:
            new_hashes.setdefault(step_hash(x), x.id)
    done_new: set[str] = set()
    for s in sorted(stand.completed, key=lambda x: o[x].index if x in o else 1 << 30):
        old_node, target = o.get(s), rename.get(s, s)
        node = n.get(target)
        if old_node is None:
            continue        # an attempt of a step the old version does not have (cannot happen for a run of it)
        if node is None:
            again = new_hashes.get(step_hash(old_node))
            if s in removed:
                add(s, MAPPABLE, "removed", f"completed step {s} was removed: its result is forgotten")
            elif again is not None and allow_reexecute:
                add(s, MAPPABLE, "reexecute", f"completed step {s} runs again as {again}")
                move.reexecute.append(again)
            elif again is not None:
                add(s, BLOCKED, "looks_renamed", f"completed step {s} is gone; {again} has its content and would "
                                                 f"run again", f"migrate: {{from: [{stand.version}], rename: "
                                                               f"{{{s}: {again}}}}} keeps its result")
            else:
                add(s, BLOCKED, "removed", f"completed step {s} was removed",
                    f"{hint_from} and `removed: {{{s}: skip}}` forgets its result")
            continue
        if node.kind != old_node.kind:
            add(s, BLOCKED, "kind_changed", f"completed step {s} changed kind: {old_node.kind} -> {node.kind}")
            continue
        done_new.add(target)
        if target != s:
            add(s, MAPPABLE, "renamed", f"completed step {s} is {target} in v{new.version}")
            move.renames[s] = target
        elif step_hash(node) != step_hash(old_node):
            if mig is None:
                add(s, BLOCKED, "changed", f"completed step {s} changed", f"{hint_from} keeps it done (not re-run)")
            else:
                add(s, MAPPABLE, "changed", f"completed step {s} changed: kept done, not re-run")
        if mig is not None and target in mig.outputs:
            move.outputs[target] = mig.outputs[target]
            add(target, MAPPABLE, "output", f"the output of {target} is recomputed by migrate outputs")
    for s in sorted(stand.active, key=lambda x: o[x].index if x in o else 1 << 30):
        old_node, node = o.get(s), n.get(s)
        if old_node is None:
            continue
        if node is None:
            detail = f" (migrate renames it to {rename[s]}: a parked step keeps its id)" if s in rename else ""
            add(s, BLOCKED, "removed", f"step {s}, where the run stands, was removed{detail}")
        elif node.kind != old_node.kind:
            add(s, BLOCKED, "kind_changed", f"step {s}, where the run stands, changed kind: {old_node.kind} -> "
                                            f"{node.kind}")
        elif step_hash(node) != step_hash(old_node):
            if node.kind in PARKED_KINDS:
                add(s, BLOCKED, "shape_changed", f"the {node.kind} of step {s}, where the run stands, changed")
            elif mig is None:
                add(s, BLOCKED, "changed", f"step {s}, where the run stands, changed", f"{hint_from} accepts it")
            else:
                add(s, MAPPABLE, "changed", f"step {s}, where the run stands, changed: its next attempt uses v"
                                            f"{new.version}")
    reached = done_new | {s for s in stand.active if s in n}
    before = _ancestors(new, reached) - reached
    renamed_to = set(rename.values())
    for node in new.nodes:
        t = node.id
        if t not in before or t in move.reexecute:     # a step run again is listed as such, already
            continue
        if t in o or t in renamed_to:
            add(t, BLOCKED, "reordered", f"step {t} now runs before steps the run already reached")
        elif mig is not None and mig.added_before_frontier is not None:
            add(t, MAPPABLE, "added_before_frontier", f"step {t} was added before the frontier: "
                                                      f"{mig.added_before_frontier}")
            if mig.added_before_frontier == "skip":
                move.skip_added.append(t)
        else:
            add(t, BLOCKED, "added_before_frontier", f"step {t} was added before the frontier",
                f"{hint_from} and `addedBeforeFrontier: skip|run`")
    outcome = BLOCKED if any(r.outcome == BLOCKED for r in reasons) else MAPPABLE if reasons else COMPATIBLE
    index = {x.id: x.index for x in old.nodes} | {x.id: x.index for x in new.nodes}
    reasons.sort(key=lambda r: -1 if r.step is None else index.get(r.step, 1 << 30))
    return RunPlan(stand, outcome, reasons, move)
