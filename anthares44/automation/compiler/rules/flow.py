"""Flow-control rules (§22, docs/flow.md): the longest pause an upstream 429 may cause (`maxPause`, on an http
step or a declared http connector) lies between MIN_PAUSE_MS and MAX_PAUSE_LIMIT_MS (1s .. 24h): a shorter one
would let a far side that keeps answering 429 be asked again at once, a longer one hold every run on the key for
days on one answer. Its shape (a duration) and `rateKey`'s (1-200 of A-Z a-z 0-9 _ . : / @ -) are the models'.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, register
from ...durations import duration_ms
from ..models.params import MAX_PAUSE_LIMIT_MS, MIN_PAUSE_MS
from ..resolve import resolve

if TYPE_CHECKING:
    from ..project import Project
    from ..source import Path, SourceFile

A44250 = register("A44250", "maxPause is outside 1s..24h")
PAUSING_TYPES = ("http", "vpn/http")


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        for i, step in enumerate(decl.model.steps):
            raw = (step.model_extra or {}).get("maxPause")
            if step.uses is None or raw is None or resolve(step.uses, project).type not in PAUSING_TYPES:
                continue
            try:
                ms = duration_ms(raw)
            except ValueError:
                continue        # not a duration: the params model reports it
            yield from _bounds(decl.src, decl.path + ("steps", i, "maxPause"), ms, f"step {step.id!r}")
    for c in project.of_kind("connector"):
        if c.model.maxPause is not None and c.model.type in PAUSING_TYPES:
            yield from _bounds(c.src, c.path + ("maxPause",), c.model.maxPause, f"connector {c.model.id!r}")


def _bounds(src: SourceFile, path: Path, ms: int, whose: str) -> Iterator[Diagnostic]:
    if MIN_PAUSE_MS <= ms <= MAX_PAUSE_LIMIT_MS:
        return
    yield Diagnostic.at(A44250, f"maxPause of {whose} must be between 1s and 24h", src.path, src.span(path),
                        hint="a 429's Retry-After is clamped to it; leave it out for the default 1h")
