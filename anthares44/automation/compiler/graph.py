"""The step graph of a workflow: explicit edges from `needs`, else from the written order (§3.6)."""

from __future__ import annotations


def edges(wf) -> list[tuple[str, str]]:
    """(from, to) pairs: `to` runs after `from`. The written order gives each step an edge from the step
    written before it; a step with `needs` replaces that edge with exactly the steps it names (`needs: []`
    makes it a root). Nothing runs in parallel unless a `needs` says so: the conservative default."""
    ids = {s.id for s in wf.steps}
    out: list[tuple[str, str]] = []
    for i, step in enumerate(wf.steps):
        if step.needs is not None:
            out.extend((d, step.id) for d in step.needs if d in ids and d != step.id)
        elif i > 0:
            out.append((wf.steps[i - 1].id, step.id))
    return out


def predecessors(wf) -> dict[str, set[str]]:
    """For every step, the steps that certainly finished before it (transitive closure of its edges)."""
    direct: dict[str, set[str]] = {s.id: set() for s in wf.steps}
    for a, b in edges(wf):
        direct.setdefault(b, set()).add(a)
    out: dict[str, set[str]] = {}
    for sid in direct:
        seen: set[str] = set()
        stack = list(direct[sid])
        while stack:
            n = stack.pop()
            if n in seen or n == sid:
                continue
            seen.add(n)
            stack.extend(direct.get(n, ()))
        out[sid] = seen
    return out
