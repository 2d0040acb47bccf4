"""The step graph of a workflow: explicit edges from `needs`, else from the written order (§3.6), and the set
of steps that certainly finished before each step.

The "finished before" sets are the transitive closure of the edges; spelled out as one Python set per step they
are quadratic (a 14,000-step sequence holds 98 million members). Here the closure is computed once per
strongly connected component, in topological order, as a bit mask (a Python int, one bit per step): one OR per
edge, done in C, and every step of a component shares its component's mask. The masks still hold steps^2/2 bits
in a long sequence (12 MB at 14,000 steps), but no Python object per member, and a lookup is one shift.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Workflow


def edges(wf: Workflow) -> list[tuple[str, str]]:
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


class Before:
    """The steps that certainly finished before one step: a read-only set of step ids, iterated in sorted
    order."""

    __slots__ = ("_bits", "_self", "_names", "_index")

    def __init__(self, bits: int, self_index: int | None, names: list[str], index: dict[str, int]):
        self._bits = bits          # shared by every step of one component: the step itself is left out below
        self._self = self_index
        self._names = names
        self._index = index

    def __contains__(self, sid: object) -> bool:
        i = self._index.get(sid) if isinstance(sid, str) else None
        return i is not None and i != self._self and (self._bits >> i) & 1 == 1

    def __iter__(self) -> Iterator[str]:
        names, me = self._names, self._self
        bits = bin(self._bits)[:1:-1]   # bit i at position i; find() skips the zeros in C
        i = bits.find("1")
        while i >= 0:
            if i != me:
                yield names[i]
            i = bits.find("1", i + 1)

    def __len__(self) -> int:
        return self._bits.bit_count() - (self._self is not None and (self._bits >> self._self) & 1)

    def __bool__(self) -> bool:
        return len(self) > 0

    def first(self, k: int) -> list[str]:
        """The first `k` names in sorted order, lowest bits first: k operations, however many steps."""
        bits = self._bits if self._self is None else self._bits & ~(1 << self._self)
        out: list[str] = []
        while bits and len(out) < k:
            low = bits & -bits
            out.append(self._names[low.bit_length() - 1])
            bits ^= low
        return out

    def including(self, sid: str) -> Before:
        """This set plus the step `sid` itself (a compensation also sees the step it undoes)."""
        i = self._index.get(sid)
        if i is None:
            return self
        return Before(self._bits | (1 << i), None if i == self._self else self._self, self._names, self._index)


def predecessors(wf: Workflow) -> dict[str, Before]:
    """For every step, the steps that certainly finished before it (transitive closure of its edges; a step
    on a cycle sees the rest of its cycle, never itself)."""
    names = sorted({s.id for s in wf.steps})   # bit i is the i-th name in sorted order: iteration is sorted
    index = {sid: i for i, sid in enumerate(names)}
    preds: list[list[int]] = [[] for _ in names]
    succs: list[list[int]] = [[] for _ in names]
    for a, b in edges(wf):
        preds[index[b]].append(index[a])
        succs[index[a]].append(index[b])
    comp, order = _components(succs, preds)
    members = [0] * len(order)
    for v, c in enumerate(comp):
        members[c] |= 1 << v
    reach = [0] * len(order)   # per component: itself and everything before it
    for c, nodes in enumerate(order):
        bits = members[c]
        for v in nodes:
            for u in preds[v]:
                if comp[u] != c:
                    bits |= reach[comp[u]]
        reach[c] = bits
    return {sid: Before(reach[comp[v]], v, names, index) for v, sid in enumerate(names)}


def _components(succs: list[list[int]], preds: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Strongly connected components (Kosaraju, iterative: no recursion limit), numbered in topological
    order: every edge goes from a component to itself or to a later one. Returns (component of each node,
    nodes of each component)."""
    n = len(succs)
    seen = [False] * n
    finished: list[int] = []
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(succs[root]))]
        while stack:
            node, it = stack[-1]
            for nxt in it:
                if not seen[nxt]:
                    seen[nxt] = True
                    stack.append((nxt, iter(succs[nxt])))
                    break
            else:
                stack.pop()
                finished.append(node)
    comp = [-1] * n
    order: list[list[int]] = []
    for root in reversed(finished):
        if comp[root] != -1:
            continue
        c = len(order)
        comp[root] = c
        nodes = [root]
        todo = [root]
        while todo:
            for u in preds[todo.pop()]:
                if comp[u] == -1:
                    comp[u] = c
                    nodes.append(u)
                    todo.append(u)
        order.append(nodes)
    return comp, order
