"""Flow-limit rules (§22, docs/flow.md): a `priority` is 1..9 or CEL; every per-key `concurrency` entry, `throttle`
and `rateLimit` has a positive `limit` (a limit of 0 would hold every run forever), a known `scope`, a window `per`
between 1 s and 7 d (shorter is a spin, longer outlives what a token bucket or a count is kept for), and a `key`
(also `fairness`'s key and weight) that is CEL over `input` (the value is computed per run before it is admitted;
docs/flow.md "Keys").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, register
from .expressions import expression_diagnostics

if TYPE_CHECKING:
    from ..project import Project
    from ..source import Path, SourceFile

A44281 = register("A44281", "a flow limit's limit is not positive")
A44282 = register("A44282", "a flow limit's per is outside 1s..7d")
A44283 = register("A44283", "a concurrency limit's scope is neither workflow nor project")
A44284 = register("A44284", "a workflow's priority is outside 1..9")

KEY_ROOTS = {"input"}
SCOPES = ("workflow", "project")
MIN_PER_MS = 1000
MAX_PER_MS = 7 * 86_400_000


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        wf, src = decl.model, decl.src
        if isinstance(wf.concurrency, list):
            for i, c in enumerate(wf.concurrency):
                at = decl.path + ("concurrency", i)
                yield from _limit(src, at, c.limit)
                yield from _key(src, at, c.key)
                if c.scope not in SCOPES:
                    yield Diagnostic.at(A44283, f"scope {c.scope!r} is not one of workflow, project", src.path,
                                        src.span(at + ("scope",)),
                                        hint="`workflow` (the default) counts this workflow's runs; `project` "
                                             "shares the key's slots with every workflow naming it")
        if isinstance(wf.priority, str):
            yield from expression_diagnostics(src, decl.path + ("priority",), wf.priority, KEY_ROOTS,
                                              expect_bool=False)
        elif wf.priority is not None and not 1 <= wf.priority <= 9:
            yield Diagnostic.at(A44284, f"priority must be 1 (first) to 9, not {wf.priority}", src.path,
                                src.span(decl.path + ("priority",)), hint="leave it out for 5")
        if wf.fairness is not None:
            yield from _key(src, decl.path + ("fairness",), wf.fairness.key)
            if wf.fairness.weight is not None:
                yield from expression_diagnostics(src, decl.path + ("fairness", "weight"), wf.fairness.weight,
                                                  KEY_ROOTS, expect_bool=False)
        for name in ("throttle", "rateLimit"):
            w: Any = getattr(wf, name)
            if w is None:
                continue
            at = decl.path + (name,)
            yield from _limit(src, at, w.limit)
            yield from _key(src, at, w.key)
            if not MIN_PER_MS <= w.per <= MAX_PER_MS:
                yield Diagnostic.at(A44282, f"{name}.per must be between 1s and 7d", src.path,
                                    src.span(at + ("per",)), hint="e.g. per: 1m")
            if name == "throttle" and w.burst is not None and w.burst <= 0:
                yield Diagnostic.at(A44281, "throttle.burst must be at least 1", src.path,
                                    src.span(at + ("burst",)), hint="leave it out for 1")


def _limit(src: SourceFile, at: Path, limit: int) -> Iterator[Diagnostic]:
    if limit <= 0:
        yield Diagnostic.at(A44281, f"limit must be at least 1, not {limit}", src.path, src.span(at + ("limit",)),
                            hint="a limit of 0 would hold every run of the key forever; pause a key with "
                                 "`a44 automation flow pause KEY` instead")


def _key(src: SourceFile, at: Path, text: str) -> Iterator[Diagnostic]:
    yield from expression_diagnostics(src, at + ("key",), text, KEY_ROOTS, expect_bool=False)
