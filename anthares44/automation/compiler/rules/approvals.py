"""Approval rules (§20, docs/approvals.md): approver group names unique across the files; every group an approval
step names declared (in these files, or published in the project: unsettled is a warning in lint and an error at
publish); `min` within the groups' members; reminders and escalation before the timeout; and the step's form (an
approval takes no `uses`, `timeout`, `retry`...). That the timeout fits in `maxDuration` is rules/timers.py's A44214."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, Severity, register
from ..validation import did_you_mean

if TYPE_CHECKING:
    from ..models.approvals import Approval
    from ..project import Project
    from ..source import Path, SourceFile

A44260 = register("A44260", "approval names an approver group that is not declared")
A44261 = register("A44261", "approver group cannot be settled from the linted files", Severity.WARNING)
A44262 = register("A44262", "approval needs more approvers than its groups have")
A44263 = register("A44263", "reminder or escalation not before the approval's timeout")
A44264 = register("A44264", "approval step takes no uses, timeout, retry, sleep or wait")
A44265 = register("A44265", "two approver groups with one name")

NOT_ON_APPROVAL = ("uses", "timeout", "retry", "compensate", "exclusive", "with", "rows", "expect", "partitions",
                   "sleep", "wait")


def check(project: Project) -> Iterator[Diagnostic]:
    seen: dict[str, str] = {}
    for decl in project.of_kind("approvers"):
        name = decl.model.name
        if name in seen:
            yield Diagnostic.at(A44265, f"approver group {name!r} is declared twice (also in {seen[name]})",
                                decl.src.path, decl.src.span(decl.path + ("name",)), hint="rename one of them")
        seen[name] = decl.src.path
    members = {name: len(set(d.model.members)) for name, d in project.approver_groups.items()}
    for decl in project.of_kind("workflow"):
        for i, step in enumerate(decl.model.steps):
            path = decl.path + ("steps", i)
            written = decl.written("steps", i)
            if step.approval is None or not isinstance(written, dict):
                continue
            for key in NOT_ON_APPROVAL:
                if key in written:
                    yield Diagnostic.at(A44264, f"approval step {step.id!r} takes no {key!r}", decl.src.path,
                                        decl.src.span(path + (key,), key=True), hint=_hint(key))
            yield from _approval(project, decl.src, path + ("approval",), step.id, step.approval, members)


def _hint(key: str) -> str:
    if key == "timeout":
        return "an approval's timeout goes in its block: `approval: {approvers: {...}, timeout: 72h}`"
    return "an approval holds no worker; put the effect in its own step after it"


def _approval(project: Project, src: SourceFile, path: Path, step_id: str, a: Approval,
              members: dict[str, int]) -> Iterator[Diagnostic]:
    known = project.known.approver_groups
    counted: dict[str, int] = {}
    groups: list[tuple[Path, str]] = [(path + ("approvers", "groups", j), g) for j, g in enumerate(a.approvers.groups)]
    if a.escalate is not None:
        groups += [(path + ("escalate", "to", "groups", j), g) for j, g in enumerate(a.escalate.to.groups)]
    settled = True
    for where, group in groups:
        if group in members or group in known:
            counted[group] = members.get(group, known.get(group, 0))
            continue
        settled = False
        near = did_you_mean(group, {**dict.fromkeys(members), **dict.fromkeys(known)})
        if project.mode == "publish":
            yield Diagnostic.at(A44260, f"the approval of step {step_id!r} names group {group!r}, which is not "
                                        f"declared" + (f" ({project.known.where})" if project.known.where else ""),
                                src.path, src.span(where),
                                hint=near or "declare it in a `kind: approvers` file (`name`, `members`)")
        else:
            yield Diagnostic.at(A44261, f"the approval of step {step_id!r} names group {group!r}, which these "
                                        f"files do not declare", src.path, src.span(where),
                                hint=near or "publish fails unless the project has it (a `kind: approvers` file)")
    most = sum(counted.get(g, 0) for g in dict.fromkeys(a.approvers.groups))
    if settled and a.approvers.min > most:
        yield Diagnostic.at(A44262, f"the approval of step {step_id!r} needs {a.approvers.min} approvals; its groups "
                                    f"have {most} member(s)", src.path, src.span(path + ("approvers", "min")),
                            hint="lower `min` or add members to the groups")
    for j, at in enumerate(a.remind or ()):
        yield from _before(src, path + ("remind", j), step_id, "reminder", at, a.timeout)
    if a.escalate is not None:
        yield from _before(src, path + ("escalate", "after"), step_id, "escalation", a.escalate.after, a.timeout)


def _before(src: SourceFile, where: Any, step_id: str, what: str, at_ms: int, timeout_ms: int) -> Iterator[Diagnostic]:
    if at_ms >= timeout_ms:
        yield Diagnostic.at(A44263, f"the {what} of step {step_id!r} at {_text(at_ms)} is not before its timeout "
                                    f"{_text(timeout_ms)}: it would never happen", src.path, src.span(where),
                            hint=f"make the {what} earlier than `timeout`, or the timeout longer")


def _text(ms: int) -> str:
    from .timers import _text as text

    return text(ms)
