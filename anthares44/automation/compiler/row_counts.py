"""Row counts (§16, docs/rows.md): the shape of a step's `rows` (in / out / error), how a run's totals add up
without double counting, and what a failed expectation says.

Pure functions, below both the runtime (YAML steps) and the sdk (code steps), so both count the same way. The run
totals: `in` is what the run read, the `in` of the earliest steps that report one (no ancestor reports `in`);
`out` is what it wrote, the `out` of the last steps that report one (no descendant reports `out`); `error` is
every step's `error` added up (a row is rejected once, by the step that rejects it). A step's counts are its
partitions' counts added up first (partition '' is the step as a whole).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import E_EXPECTATION_FAILED, A44Error

ROW_KEYS = ("in", "out", "error")
WHOLE_STEP = ""                   # the partition key of a step's own counts
MAX_SHOWN = 6                     # values a failed expectation's message quotes


def counts(value: Any, what: str) -> dict[str, int]:
    """Validate `{in?, out?, error?}` of non-negative integers (None values dropped). Raises ValueError."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a mapping of in / out / error, not {type(value).__name__}")
    out: dict[str, int] = {}
    for k, v in value.items():
        if k not in ROW_KEYS:
            raise ValueError(f"{what} has no row count {k!r} (in, out, error)")
        if v is None:
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{what}.{k} must be a non-negative integer, not {v!r}")
        out[k] = v
    return out


def step_total(by_partition: dict[str, dict[str, int]]) -> dict[str, int]:
    """A step's counts: its partitions' added up (a key is present when some partition reports it)."""
    total: dict[str, int] = {}
    for c in by_partition.values():
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return total


def run_totals(steps: dict[str, dict[str, int]], ancestors: Callable[[str], set[str]]) -> dict[str, int | None]:
    """The run's in / out / error from the counted steps' counts (see the module docstring)."""
    out: dict[str, int | None] = {}
    for key in ROW_KEYS:
        reporting = {s for s, c in steps.items() if key in c}
        if not reporting:
            out[key] = None
            continue
        if key == "in":
            picked = {s for s in reporting if not ancestors(s) & reporting}
        elif key == "out":
            picked = {s for s in reporting if not any(s in ancestors(t) for t in reporting if t != s)}
        else:
            picked = reporting
        out[key] = sum(steps[s][key] for s in picked)
    return out


def summary_rows(recorded: dict[str, dict[str, dict[str, int]]], counted: Iterable[str],
                 ancestors: Callable[[str], set[str]]) -> dict[str, Any]:
    """The row part of a run's summary: `rows_in`, `rows_out`, `rows_in_error` and `step_rows` (step -> counts)."""
    steps = {s: step_total(recorded[s]) for s in counted if s in recorded}
    totals = run_totals(steps, ancestors)
    return {"rows_in": totals["in"], "rows_out": totals["out"], "rows_in_error": totals["error"],
            "step_rows": steps}


def linear_ancestors(order: list[str]) -> Callable[[str], set[str]]:
    """Ancestors in a sequence (a code workflow's steps): everything before."""
    pos = {s: i for i, s in enumerate(order)}
    return lambda s: set(order[:pos.get(s, 0)])


def _seen(text: str, activation: dict[str, Any]) -> list[str]:
    """`path = value` of the `rows.*`, `result.*` and `input.*` selections an expression reads."""
    from ..grammar.parser import SyntaxProblem, parse

    try:
        stack = [parse(text)]
    except SyntaxProblem:
        return []
    paths: list[tuple[int, list[str]]] = []
    while stack:
        n = stack.pop()
        chain, t = [], n
        while t.kind == "select":
            chain.append(t.args[1])
            t = t.args[0]
        if chain and t.kind == "ident" and t.args[0] in activation:
            paths.append((n.offset, [t.args[0], *reversed(chain)]))
            continue
        stack.extend(n.children())
    shown, out = set(), []
    for _, path in sorted(paths):
        name = ".".join(path)
        if name in shown:
            continue
        shown.add(name)
        v: Any = activation
        for p in path:
            v = v.get(p, "(absent)") if isinstance(v, dict) else "(absent)"
        out.append(f"{name} = {_short(v)}")
    return out[:MAX_SHOWN]


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def expectation_failed(where: str, text: str, activation: dict[str, Any], step_id: str | None = None) -> A44Error:
    """E_EXPECTATION_FAILED naming the expectation and the values it read."""
    seen = _seen(text, activation)
    msg = f"{where}: expectation `{text}` does not hold" + (f" ({', '.join(seen)})" if seen else "")
    return A44Error(E_EXPECTATION_FAILED, msg, step_id=step_id,
                    hint="the data, not the code, is what to look at: an empty or stale input is the usual cause",
                    details={"expectation": text, "rows": activation.get("rows")})
