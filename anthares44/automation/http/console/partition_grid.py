"""The partitions page's grid: one row per partition, one column per day (the day its partition row was last
updated, UTC), each cell the state of that partition's latest row that day. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Grid:
    days: list[str]
    rows: list[tuple[str, list[dict | None]]]     # (partition, a cell per day: the partition doc or None)


def grid(partitions: list[dict], max_days: int = 31) -> Grid:
    cells: dict[tuple[str, str], dict] = {}
    for p in partitions:
        at = p.get("updated_at") or p.get("started_at")
        day = at.date().isoformat() if at is not None else "-"
        key = (p["partition"], day)
        if key not in cells or (cells[key].get("updated_at") and at and at > cells[key]["updated_at"]):
            cells[key] = p
    days = sorted({d for _, d in cells})[-max_days:]
    names = sorted({n for n, _ in cells})
    return Grid(days, [(n, [cells.get((n, d)) for d in days]) for n in names])
