"""Child-workflow rules (§21, docs/children.md): a `uses: workflow/NAME` step names a workflow of these files or
one already published (else A44270: an error at publish, a warning in lint), takes only the keys a child step
has (A44274), and the call graph the project's child steps draw has no cycle (A44271) and no chain deeper than
MAX_DEPTH (A44272): a cycle would start runs without end, and the runtime refuses a child below depth 8.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, Severity, register
from ..models.workflow import Wait
from ..validation import did_you_mean

if TYPE_CHECKING:
    from ..documents import Decl
    from ..models import Step, Workflow
    from ..project import Project

A44270 = register("A44270", "a child-workflow step names an unknown workflow")
A44271 = register("A44271", "the child-workflow call graph has a cycle")
A44272 = register("A44272", "the child-workflow call graph is deeper than 8")
A44274 = register("A44274", "a key or value a child-workflow step does not take")

CHILD_PREFIX = "workflow/"
MAX_DEPTH = 8
CHILD_KEYS = {"input", "childOnTimeout", "onParentCancel"}     # beside the Step model's own fields
NOT_ON_CHILD = ("retry", "sleep", "with", "partitions", "onPartitionFailure", "rows", "expect", "exclusive")
CHOICES = {"childOnTimeout": ("cancel", "keep"), "onParentCancel": ("cancel", "abandon")}


def is_child(uses: str | None) -> bool:
    return uses is not None and uses.startswith(CHILD_PREFIX)


def target_id(uses: str) -> str:
    from ..project import workflow_id

    return workflow_id(uses[len(CHILD_PREFIX):])


def check(project: Project) -> Iterator[Diagnostic]:
    edges: dict[str, list[tuple[str, Decl[Workflow], int]]] = {}
    for decl in project.of_kind("workflow"):
        from ..project import workflow_id

        me = workflow_id(decl.model.name)
        for i, step in enumerate(decl.model.steps):
            if not is_child(step.uses):
                continue
            assert step.uses is not None
            yield from _keys(decl, i, step)
            for key, uses in (("uses", step.uses), ("compensate", step.compensate)):
                if key == "compensate" and uses is None:
                    continue
                if not isinstance(uses, str) or not is_child(uses):
                    yield _at(decl, i, key, f"the compensate of child step {step.id!r} must be `workflow/NAME`",
                              "a child step is undone by a workflow: `compensate: workflow/tenant-offboard`")
                    continue
                tid = target_id(uses)
                if tid not in project.workflows and tid not in project.known.workflows:
                    yield _unknown(project, decl, i, key, uses)
                elif key == "uses":
                    edges.setdefault(me, []).append((tid, decl, i))
    yield from _graph(edges)


def _keys(decl: Decl[Workflow], i: int, step: Step) -> Iterator[Diagnostic]:
    written = decl.written("steps", i)
    written = written if isinstance(written, dict) else {}
    for key in NOT_ON_CHILD:
        if key in written:
            yield _at(decl, i, key, f"child step {step.id!r} takes no {key!r}",
                      "a child's failure is final (its own steps retry); fan out with partitions in the child")
    if isinstance(step.wait, Wait):
        yield _at(decl, i, "wait", f"the wait of child step {step.id!r} is result, started or none",
                  "`wait: result` (default) waits for the child's end")
    extra: dict[str, Any] = dict(step.model_extra or {})
    for key, value in extra.items():
        if key not in CHILD_KEYS:
            yield _at(decl, i, key, f"child step {step.id!r} takes no {key!r}",
                      "a child step takes input, wait, timeout, childOnTimeout, onParentCancel, compensate"
                      + (f"; {close}" if (close := did_you_mean(key, sorted(CHILD_KEYS))) else ""))
        elif key in CHOICES and value not in CHOICES[key]:
            yield _at(decl, i, key, f"{key} of child step {step.id!r} is {value!r}; one of "
                                    f"{', '.join(CHOICES[key])}", f"`{key}: {CHOICES[key][0]}` is the default")
        elif key == "input" and not isinstance(value, dict):
            yield _at(decl, i, key, f"the input of child step {step.id!r} is not a mapping",
                      "e.g. `input: {name: \"{{ input.name }}\"}`")


def _graph(edges: dict[str, list[tuple[str, Decl[Workflow], int]]]) -> Iterator[Diagnostic]:
    """A44271 at the step that closes each cycle (once per cycle); A44272 at the first step of a workflow no
    other one calls whose chain of child calls is longer than MAX_DEPTH."""
    seen_cycles: set[frozenset[str]] = set()
    depth: dict[str, int] = {}      # the longest chain of calls below a workflow (its cycle-free part)
    found: list[Diagnostic] = []

    def longest(node: str, stack: list[str]) -> None:
        best = 0
        for tid, decl, i in edges.get(node, []):
            if tid in stack:
                cycle = stack[stack.index(tid):] + [tid]
                if frozenset(cycle) not in seen_cycles:
                    seen_cycles.add(frozenset(cycle))
                    found.append(_at(decl, i, "uses", f"child step {decl.model.steps[i].id!r} closes a call "
                                                      f"cycle: {' -> '.join(cycle)}",
                                     "a workflow may not start itself through its children; break the cycle",
                                     A44271))
                continue
            if tid not in depth:
                longest(tid, stack + [tid])
            best = max(best, depth[tid] + 1)
        depth[node] = best

    for root in sorted(edges):
        if root not in depth:
            longest(root, [root])
    yield from found
    called = {tid for calls in edges.values() for tid, _, _ in calls}
    for top in sorted(set(edges) - called):
        if depth[top] > MAX_DEPTH:
            tid, decl, i = max(edges[top], key=lambda e: depth.get(e[0], 0))
            yield _at(decl, i, "uses", f"child step {decl.model.steps[i].id!r} starts a chain of {depth[top]} "
                                       f"nested child calls; at most {MAX_DEPTH}",
                      "flatten the tree: a child's child may be started by the parent instead", A44272)


def _at(decl: Decl[Workflow], i: int, key: str, message: str, hint: str, code: str = A44274) -> Diagnostic:
    return Diagnostic.at(code, message, decl.src.path, decl.src.span(decl.path + ("steps", i, key)), hint=hint)


def _unknown(project: Project, decl: Decl[Workflow], i: int, key: str, uses: str) -> Diagnostic:
    names = sorted({d.model.name for d in project.of_kind("workflow")})
    sev = Severity.ERROR if project.mode == "publish" else Severity.WARNING
    close = did_you_mean(uses[len(CHILD_PREFIX):], names)
    where = "these files" + (f" nor {project.known.where}" if project.known.where else "")
    return Diagnostic.at(A44270, f"{uses!r} names no workflow of {where}", decl.src.path,
                         decl.src.span(decl.path + ("steps", i, key)), severity=sev,
                         hint=close or "publish the child workflow in the same call, or first")
