"""Deploy rules (§23, docs/deploys.md): `versioning` is `pin` or `auto-upgrade`, `addedBeforeFrontier` `skip`
or `run`, a `removed` action `skip` (A44307); `rename` maps an old step id that this version no longer has to a
step of this version, each new id once, `removed` names steps gone from this version and `outputs` steps of this
version, each with CEL over `output` (A44308); a `migrate:` block covers only older versions (A44309). Whether the
old ids exist in the older version is the plan's to say (it reads the store). (A44300-A44306 are CEL's.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, register
from ...suggestions import listing
from ..models.deploys import ADDED_BEFORE_FRONTIER, REMOVED, VERSIONING
from ..validation import did_you_mean
from .expressions import expression_diagnostics

if TYPE_CHECKING:
    from ..project import Project

A44307 = register("A44307", "versioning, addedBeforeFrontier or a removed action has a value that is not allowed")
A44308 = register("A44308", "migrate names a step wrongly (rename, removed, outputs)")
A44309 = register("A44309", "migrate from names a version that is not older than this one")
OUTPUT_ROOTS = {"output", "input"}


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        wf, src, path = decl.model, decl.src, decl.path
        if wf.versioning is not None and wf.versioning not in VERSIONING:
            yield Diagnostic.at(A44307, f"versioning {wf.versioning!r} must be one of {', '.join(VERSIONING)}",
                                src.path, src.span(path + ("versioning",)),
                                hint="pin (default) keeps every run on the version it started on")
        m = wf.migrate
        if m is None:
            continue
        base = path + ("migrate",)
        ids = [s.id for s in wf.steps]
        for i, v in enumerate(m.from_):
            if v >= wf.version:
                yield Diagnostic.at(A44309, f"migrate from version {v}: only runs of versions older than "
                                            f"{wf.version} can move to it", src.path, src.span(base + ("from", i)),
                                    hint=f"list the versions below {wf.version} whose runs may move")
        seen: dict[str, str] = {}
        for old, new in (m.rename or {}).items():
            at = src.span(base + ("rename", old))
            if new not in ids:
                yield Diagnostic.at(A44308, f"migrate rename {old!r} -> {new!r}: version {wf.version} has no step "
                                            f"{new!r}", src.path, at,
                                    hint=did_you_mean(new, ids) or f"steps are: {listing(ids)}")
            if old in ids:
                yield Diagnostic.at(A44308, f"migrate rename {old!r} -> {new!r}: version {wf.version} still has a "
                                            f"step {old!r}", src.path, src.span(base + ("rename", old), key=True),
                                    hint="a rename maps an id the new version dropped; leave it out if the step kept "
                                         "its id")
            if new in seen:
                yield Diagnostic.at(A44308, f"migrate rename maps both {seen[new]!r} and {old!r} to {new!r}",
                                    src.path, at, hint="one old step's result can become one new step's")
            seen.setdefault(new, old)
        for old, action in (m.removed or {}).items():
            at = src.span(base + ("removed", old))
            if action not in REMOVED:
                yield Diagnostic.at(A44307, f"migrate removed {old!r}: {action!r} is not an action; use skip",
                                    src.path, at, hint="skip forgets the old step's result")
            if old in ids:
                yield Diagnostic.at(A44308, f"migrate removed {old!r}: version {wf.version} still has that step",
                                    src.path, src.span(base + ("removed", old), key=True),
                                    hint="list only steps the new version dropped")
        abf = m.addedBeforeFrontier
        if abf is not None and abf not in ADDED_BEFORE_FRONTIER:
            yield Diagnostic.at(A44307, f"migrate addedBeforeFrontier {abf!r} must be skip or run", src.path,
                                src.span(base + ("addedBeforeFrontier",)),
                                hint="skip records the new step skipped; run runs it at the run's next visit")
        for step, text in (m.outputs or {}).items():
            if step not in ids:
                yield Diagnostic.at(A44308, f"migrate outputs {step!r}: version {wf.version} has no such step",
                                    src.path, src.span(base + ("outputs", step), key=True),
                                    hint=did_you_mean(step, ids) or f"steps are: {listing(ids)}")
                continue
            yield from expression_diagnostics(src, base + ("outputs", step), text, OUTPUT_ROOTS, expect_bool=False)
