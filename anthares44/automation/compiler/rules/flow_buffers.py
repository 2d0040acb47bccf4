"""Debounce and batch rules (§22, docs/flow.md "Debounce and batch"): `quiet` and `maxWait` lie in 1s..7d and
quiet is at most maxWait (A44290, A44291); `maxBytes` lies in 1KB..10MB (A44292); a workflow has a debounce or a
batch, not both (A44293); the `key` is CEL over `input` (the event's data) and `event` (its envelope). `maxSize`
(1..10000) and `deliver` (last | first | all) are the model's (A44109, A44104).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, register
from ..models.flow_buffers import DEFAULT_DEBOUNCE_WAIT_MS, MAX_BYTES, MAX_SPAN_MS, MIN_BYTES, MIN_SPAN_MS
from ..models.types import format_duration
from .expressions import expression_diagnostics

if TYPE_CHECKING:
    from ..project import Project
    from ..source import Path, SourceFile

A44290 = register("A44290", "debounce/batch duration is outside 1s..7d")
A44291 = register("A44291", "debounce quiet is longer than its maxWait")
A44292 = register("A44292", "batch maxBytes is outside 1KB..10MB")
A44293 = register("A44293", "a workflow has both debounce and batch")
KEY_ROOTS = {"input", "event"}


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        wf, src, path = decl.model, decl.src, decl.path
        if wf.debounce is not None and wf.batch is not None:
            yield Diagnostic.at(A44293, "a workflow may have a debounce or a batch, not both", src.path,
                                src.span(path + ("batch",), key=True),
                                hint="debounce collapses a burst into one run; batch gathers events into runs of "
                                     "maxSize: pick one")
        d = wf.debounce
        if d is not None:
            base = path + ("debounce",)
            yield from _span(src, base + ("quiet",), d.quiet, "debounce quiet")
            if d.maxWait is not None:
                yield from _span(src, base + ("maxWait",), d.maxWait, "debounce maxWait")
            wait = d.maxWait if d.maxWait is not None else max(d.quiet, DEFAULT_DEBOUNCE_WAIT_MS)
            if d.quiet > wait:
                yield Diagnostic.at(A44291, f"debounce quiet {format_duration(d.quiet)} is longer than maxWait "
                                            f"{format_duration(wait)}: the run would start before the key was quiet",
                                    src.path, src.span(base + ("quiet",)),
                                    hint="make quiet at most maxWait")
            yield from _key(src, base + ("key",), d.key)
        b = wf.batch
        if b is not None:
            base = path + ("batch",)
            if b.maxWait is not None:
                yield from _span(src, base + ("maxWait",), b.maxWait, "batch maxWait")
            if b.maxBytes is not None and not MIN_BYTES <= b.maxBytes <= MAX_BYTES:
                yield Diagnostic.at(A44292, f"batch maxBytes ({b.maxBytes} bytes) must be between 1KB and 10MB", src.path,
                                    src.span(base + ("maxBytes",)), hint="leave it out for the default 1MB")
            yield from _key(src, base + ("key",), b.key)


def _span(src: SourceFile, path: Path, ms: int, what: str) -> Iterator[Diagnostic]:
    if not MIN_SPAN_MS <= ms <= MAX_SPAN_MS:
        yield Diagnostic.at(A44290, f"{what} {format_duration(ms)} must be between 1s and 7d", src.path,
                            src.span(path), hint="an open buffer is a promise to start a run: keep it short")


def _key(src: SourceFile, path: Path, text: str | None) -> Iterator[Diagnostic]:
    if text is not None:
        yield from expression_diagnostics(src, path, text, KEY_ROOTS, expect_bool=False)
