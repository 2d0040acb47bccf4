"""DAG rules (§3.6): `needs` names existing steps, not itself, and the graph has no cycle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, register
from ...suggestions import listing
from ..salvage import real_names
from ..validation import did_you_mean

if TYPE_CHECKING:
    from ..project import Project

A44230 = register("A44230", "needs names an unknown step")
A44231 = register("A44231", "steps depend on each other in a cycle")
A44232 = register("A44232", "step needs itself")


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        src, wf = decl.src, decl.model
        ids = [s.id for s in wf.steps]
        known = set(ids)
        shown = real_names(ids)
        graph: dict[str, list[str]] = {}
        for i, step in enumerate(wf.steps):
            deps: list[str] = []
            for j, dep in enumerate(step.needs or ()):
                path = decl.path + ("steps", i, "needs", j)
                if dep == step.id:
                    yield Diagnostic.at(A44232, f"step {step.id!r} needs itself", src.path, src.span(path))
                elif dep not in known:
                    yield Diagnostic.at(A44230, f"step {step.id!r} needs {dep!r}, which is not a step of this "
                                                f"workflow", src.path, src.span(path),
                                        hint=did_you_mean(dep, shown) or f"steps are: {listing(shown)}")
                else:
                    deps.append(dep)
            graph.setdefault(step.id, deps)
        cycle = find_cycle(graph)
        if cycle:
            first = ids.index(cycle[0])
            yield Diagnostic.at(A44231, "steps form a cycle: " + " -> ".join(cycle + [cycle[0]]), src.path,
                                src.span(decl.path + ("steps", first, "needs")),
                                hint="remove one of the `needs` entries so the steps can be ordered")


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle in `graph` (node -> nodes it needs) as a node list, or None. Iterative: no recursion limit."""
    state: dict[str, int] = {}
    for root in graph:
        if state.get(root):
            continue
        stack = [(root, iter(graph.get(root, ())))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):]
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(graph.get(nxt, ()))))
                path.append(nxt)
    return None
