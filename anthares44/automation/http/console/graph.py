"""The run page's DAG: the IR's nodes laid out in layers (a step sits one layer below the deepest step it waits
for) with each step coloured by its state in the run, as coordinates for an inline SVG."""

from __future__ import annotations

from dataclasses import dataclass

NODE_W, NODE_H, GAP_X, GAP_Y = 170, 36, 24, 28


@dataclass(frozen=True)
class Node:
    id: str
    state: str
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int


def step_states(attempts: list[dict], run: dict) -> dict[str, str]:
    """The state of each step in the run's current epoch: its last action attempt's status; compensated when a
    compensation ran for it."""
    epoch = run.get("epoch") or 0
    states: dict[str, str] = {}
    for a in attempts:
        if (a.get("epoch") or 0) != epoch:
            continue
        if a.get("kind") == "compensation":
            status = a.get("status") or "running"
            states[a["step_id"]] = "compensated" if status in ("succeeded", "compensated") else (
                status if status == "running" else "compensation_failed")
        else:
            states[a["step_id"]] = a.get("status") or "running"
    if run.get("state") == "awaiting_confirmation" and run.get("current_step"):
        states[run["current_step"]] = "awaiting_confirmation"
    return states


def layout(graph: dict, states: dict[str, str]) -> tuple[list[Node], list[Edge], int, int]:
    """(nodes, edges, width, height) of the SVG."""
    ids = [n["id"] for n in sorted(graph["nodes"], key=lambda n: n.get("index") or 0)]
    parents: dict[str, list[str]] = {i: [] for i in ids}
    for src, dst in graph["edges"]:
        if dst in parents and src in parents:
            parents[dst].append(src)
    depth: dict[str, int] = {}

    def level(i: str, seen: frozenset = frozenset()) -> int:
        if i not in depth:
            depth[i] = 0 if not parents[i] or i in seen else 1 + max(level(p, seen | {i}) for p in parents[i])
        return depth[i]
    rows: dict[int, list[str]] = {}
    for i in ids:
        rows.setdefault(level(i), []).append(i)
    pos: dict[str, tuple[int, int]] = {}
    for r, members in rows.items():
        for c, i in enumerate(members):
            pos[i] = (GAP_X + c * (NODE_W + GAP_X), GAP_Y + r * (NODE_H + GAP_Y))
    nodes = [Node(i, states.get(i, "not_started"), *pos[i]) for i in ids]
    edges = [Edge(pos[s][0] + NODE_W // 2, pos[s][1] + NODE_H, pos[d][0] + NODE_W // 2, pos[d][1])
             for s, d in graph["edges"] if s in pos and d in pos]
    width = max((x for x, _ in pos.values()), default=0) + NODE_W + GAP_X
    height = max((y for _, y in pos.values()), default=0) + NODE_H + GAP_Y
    return nodes, edges, width, height
