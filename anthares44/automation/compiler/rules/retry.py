"""Retry policy rules (§3.2): bounds that make sense together."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, Severity, register
from ..ir import RUN_DEADLINE_MS
from ..models.types import format_duration

if TYPE_CHECKING:
    from ..project import Project

A44240 = register("A44240", "retry base is larger than its cap")
A44241 = register("A44241", "retry strategy none with retries", Severity.WARNING)
A44242 = register("A44242", "retries cannot finish within the run deadline", Severity.WARNING)


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        src = decl.src
        deadline = decl.model.maxDuration or RUN_DEADLINE_MS   # how long a run may last (§19)
        for i, step in enumerate(decl.model.steps):
            r = step.retry
            if r is None:
                continue
            path = decl.path + ("steps", i, "retry")
            base = r.base if r.base is not None else 1000
            cap = r.cap if r.cap is not None else 300_000
            if base > cap:
                yield Diagnostic.at(A44240, f"retry base {format_duration(base)} is larger than cap "
                                            f"{format_duration(cap)}", src.path, src.span(path + ("base",)),
                                    hint="the delay bound grows from base up to cap")
            if r.strategy == "none" and r.max > 0:
                yield Diagnostic.at(A44241, f"strategy 'none' with max {r.max}: the step is not retried",
                                    src.path, src.span(path + ("strategy",)),
                                    hint="use exponential-jitter or fixed, or set max: 0")
            timeout = step.timeout or 0
            worst = sum(min(base * 2 ** n, cap) for n in range(min(r.max, 64))) + timeout * (r.max + 1)
            if worst > deadline:
                yield Diagnostic.at(A44242, f"{r.max} retries of {format_duration(timeout)} with backoff up to "
                                            f"{format_duration(cap)} can exceed the run's {format_duration(deadline)} "
                                            f"limit",
                                    src.path, src.span(path + ("max",)), hint="lower max or cap")
