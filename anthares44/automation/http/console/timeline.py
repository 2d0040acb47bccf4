"""The run page's Gantt: each attempt of a run as a bar on a time axis, one lane per step (and epoch), with the
waits between them (lease wait before the first attempt, retry waits between attempts of a step, durable sleeps)
drawn as their own bars. Pure: documents in, positions (percent of the axis) out; the template draws them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ...jsonenc import ms


@dataclass(frozen=True)
class Bar:
    kind: str          # lease_wait | running | succeeded | failed | retry_wait | sleep | compensation | waiting
    start_pct: float
    width_pct: float
    label: str         # what a screen reader and the tooltip say


@dataclass(frozen=True)
class Lane:
    title: str
    bars: list[Bar]


def _kind(attempt: dict, sleep_steps: set[str]) -> str:
    if attempt.get("kind") == "compensation":
        return "compensation"
    if attempt["step_id"] in sleep_steps:
        return "sleep"
    status = attempt.get("status") or "running"
    return status if status in ("succeeded", "running", "skipped") else "failed"


def lanes(run: dict, attempts: list[dict], sleep_steps: set[str], now: datetime) -> tuple[list[Lane], int]:
    """(lanes, span_ms). Bars under 0.5 % stay visible at 0.5 %."""
    start = run["created_at"]
    end = run.get("finished_at") or now
    for a in attempts:
        end = max(end, a.get("finished_at") or now)
    span = max((end - start).total_seconds(), 0.001)

    def bar(kind: str, a: datetime, b: datetime, label: str) -> Bar:
        left = max(0.0, (a - start).total_seconds() / span * 100)
        return Bar(kind, round(left, 3), round(max(0.5, (b - a).total_seconds() / span * 100), 3), label)

    out: list[Lane] = []
    if attempts:
        first = min(a["started_at"] for a in attempts)
        out.append(Lane("queued", [bar("lease_wait", start, first, f"queued / lease wait {_ms(first - start)}")]))
    by_lane: dict[tuple, list[dict]] = {}
    for a in attempts:
        by_lane.setdefault((a.get("epoch") or 0, a["step_id"], a.get("kind") or "action"), []).append(a)
    for (epoch, step, kind), items in by_lane.items():
        bars: list[Bar] = []
        previous = None
        for a in items:
            fin = a.get("finished_at") or now
            if previous is not None and previous.get("finished_at") and a["started_at"] > previous["finished_at"]:
                bars.append(bar("retry_wait", previous["finished_at"], a["started_at"],
                                f"retry wait {_ms(a['started_at'] - previous['finished_at'])}"))
            what = _kind(a, sleep_steps)
            detail = f"{step} attempt {a['attempt']}: {a.get('status')}"
            if a.get("error_code"):
                detail += f" {a['error_code']}"
            bars.append(bar(what, a["started_at"], fin, f"{detail} ({_ms(fin - a['started_at'])})"))
            previous = a
        title = step + (" (compensation)" if kind == "compensation" else "") + (f" · epoch {epoch}" if epoch else "")
        out.append(Lane(title, bars))
    return out, ms(end - start)


def _ms(delta) -> str:
    value = ms(delta)
    return f"{value} ms" if value < 10_000 else f"{value / 1000:.1f} s"
