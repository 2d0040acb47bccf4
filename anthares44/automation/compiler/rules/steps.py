"""Step shape rules: unique ids, mandatory timeout (§3.1), the sleep- and wait-step forms (§3.5b, §20) and the fan-out form
(`partitions:` with exactly one source, `onPartitionFailure` only on a fan-out call step)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, register
from ..models.workflow import Wait

if TYPE_CHECKING:
    from ..models import Step
    from ..models.workflow import PartitionRange
    from ..project import Project
    from ..source import Path, SourceFile

A44200 = register("A44200", "duplicate step id")
A44201 = register("A44201", "step has no timeout")
A44202 = register("A44202", "sleep step takes no uses, timeout or retry")
A44203 = register("A44203", "step has neither uses nor sleep")
A44217 = register("A44217", "wait step takes no uses, timeout, retry or sleep")
A44206 = register("A44206", "partitions needs exactly one of foreach or range")
A44207 = register("A44207", "onPartitionFailure or partitions where they do not apply")
A44208 = register("A44208", "a partition range needs exactly one of from or since, and since needs initial")


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        src, wf = decl.src, decl.model
        seen: dict[str, int] = {}
        for i, step in enumerate(wf.steps):
            path = decl.path + ("steps", i)
            if step.id in seen:
                yield Diagnostic.at(A44200, f"step id {step.id!r} is already used by step {seen[step.id] + 1} "
                                            f"(line {src.span(decl.path + ('steps', seen[step.id], 'id')).line})",
                                    src.path, src.span(path + ("id",)), hint="step ids must be unique")
            else:
                seen[step.id] = i
            # as written: a key the salvage set aside (its value is wrong, and reported) still counts as given
            written = decl.written("steps", i)
            written = written if isinstance(written, dict) else {}
            yield from _fan_out(src, path, step, written)
            if step.approval is not None or "approval" in written:
                continue    # its form is rules/approvals.py's
            if step.sleep is not None or isinstance(step.wait, Wait):
                form = "sleep" if step.sleep is not None else "wait"
                code = A44202 if form == "sleep" else A44217
                for key in ("uses", "timeout", "retry", "compensate", "exclusive", "with", "rows", "expect",
                            "partitions", "sleep" if form == "wait" else "wait"):
                    if key in written:
                        yield Diagnostic.at(code, f"{form} step {step.id!r} takes no {key!r}", src.path,
                                            src.span(path + (key,), key=True),
                                            hint=_hint(form, key))
                continue
            if step.uses is None and not ({"uses", "sleep", "wait"} & written.keys()):
                yield Diagnostic.at(A44203, f"step {step.id!r} has neither 'uses' nor 'sleep'", src.path,
                                    src.span(path, key=False),
                                    hint="add `uses: <connector>` (e.g. http, sql/execute, pass) or `sleep: 30s`")
                continue
            if step.uses is None:
                continue
            if step.timeout is None and "timeout" not in written:
                yield Diagnostic.at(A44201, f"step {step.id!r} has no timeout; every step must declare one",
                                    src.path, src.span(path + ("id",)),
                                    hint="add e.g. `timeout: 15s` (size it from the step's p99 plus 50%)")


def _hint(form: str, key: str) -> str:
    if form == "wait" and key == "timeout":
        return "a wait's timeout goes in its block: `wait: {signal: approved, timeout: 7d}`"
    return f"a {form} holds no worker; split the effect into its own step"


def _fan_out(src: SourceFile, path: Path, step: Step, written: dict[str, Any]) -> Iterator[Diagnostic]:
    p = step.partitions
    given: dict[str, Any] = written["partitions"] if isinstance(written.get("partitions"), dict) else {}
    if p is not None and (p.foreach is None) == (p.range is None) and not (
            p.foreach is None and {"foreach", "range"} & given.keys()):
        what = "both" if p.foreach is not None else "neither"
        yield Diagnostic.at(A44206, f"partitions of step {step.id!r} has {what} of 'foreach' and 'range'",
                            src.path, src.span(path + ("partitions",), key=True),
                            hint="give `foreach: <CEL list>` or `range: {from: <CEL>, to: <CEL>, every: 1d}`")
    if p is not None and p.key is not None and p.foreach is None:
        yield Diagnostic.at(A44206, f"partitions of step {step.id!r} sets 'key' without 'foreach'", src.path,
                            src.span(path + ("partitions", "key"), key=True),
                            hint="`key: item.id` names the key of each item of a `foreach` list; a range's keys "
                                 "are its dates")
    if p is not None and p.range is not None:
        yield from _since(src, path + ("partitions", "range"), step.id, p.range)
    if step.onPartitionFailure is not None and p is None and "partitions" not in written:
        yield Diagnostic.at(A44207, f"step {step.id!r} sets onPartitionFailure but has no partitions", src.path,
                            src.span(path + ("onPartitionFailure",), key=True),
                            hint="add `partitions:` or remove `onPartitionFailure`")


def _since(src: SourceFile, path: Path, step_id: str, r: PartitionRange) -> Iterator[Diagnostic]:
    def bad(message: str, key: str, hint: str) -> Diagnostic:
        return Diagnostic.at(A44208, f"partitions.range of step {step_id!r} {message}", src.path,
                             src.span(path + (key,), key=True) if key else src.span(path, key=True), hint=hint)

    if (r.from_ is None) == (r.since is None):
        what = "has both" if r.from_ is not None else "has neither"
        yield bad(f"{what} of 'from' and 'since'", "", "give `from: <CEL>` or `since: lastSuccess` with `initial:`")
    elif r.since is None:
        for key in ("initial", "max"):
            if getattr(r, key) is not None:
                yield bad(f"sets {key!r} without 'since'", key, "remove it, or start with `since: lastSuccess`")
    elif r.initial is None:
        yield bad("has 'since' but no 'initial'", "since",
                  "add `initial: \"2026-07-01\"`: the first partition while nothing has succeeded yet")
    elif not _iso(r.initial):
        yield bad(f"has initial {r.initial!r}, not an ISO date (2026-07-01) or date-time", "initial",
                  "write the first partition as an ISO date, e.g. `initial: \"2026-07-01\"`")


def _iso(text: str) -> bool:
    from datetime import date, datetime

    try:
        (date if len(text) == 10 else datetime).fromisoformat(text)
    except ValueError:
        return False
    return True
