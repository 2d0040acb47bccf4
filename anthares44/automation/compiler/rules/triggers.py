"""Trigger and cross-file reference rules (§8.3, §11): ids are unique across files, triggers name a workflow
that exists, inline triggers say exactly what they are, schedules carry a zone, workflows name known queues."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, register
from ..validation import A44600
from .connectors import unresolved

if TYPE_CHECKING:
    from ..documents import Decl
    from ..models import InlineTrigger
    from ..project import Project
    from ..source import Path, SourceFile

A44601 = register("A44601", "duplicate id across files")
A44602 = register("A44602", "inline trigger must name exactly one source")
A44603 = register("A44603", "option does not apply to this trigger")

_SCHEDULE_ONLY = ("tz", "dstPolicy", "overlap", "catchUp")
_EVENT_ONLY = ("filter", "deliver")


def check(project: Project) -> Iterator[Diagnostic]:
    yield from _duplicates(project)
    for decl in project.of_kind("trigger"):
        wf = decl.model.workflow
        if wf not in project.workflows and wf not in project.known.workflows:
            yield unresolved(project, decl.path + ("workflow",), decl.src, f"workflow {wf!r}",
                             sorted(set(project.workflows) | project.known.workflows), name=wf)
    for decl in project.of_kind("workflow"):
        wf, src = decl.model, decl.src
        if wf.queue and wf.queue not in project.queues and wf.queue not in project.known.queues \
                and wf.queue != "q_default":
            yield unresolved(project, decl.path + ("queue",), src, f"queue {wf.queue!r}",
                             sorted(set(project.queues) | project.known.queues), name=wf.queue)
        inline: list[tuple[Path, InlineTrigger]] = []
        if wf.trigger is not None:
            inline.append((("trigger",), wf.trigger))
        inline.extend((("triggers", j), t) for j, t in enumerate(wf.triggers or ()))
        for key, trig in inline:
            yield from _inline(src, decl.path + key, trig, decl.written(*key))


def _inline(src: SourceFile, path: Path, trig: InlineTrigger, written: Any) -> Iterator[Diagnostic]:
    sources = [k for k in ("event", "cron", "webhook", "manual") if getattr(trig, k)]
    if len(sources) != 1:
        what = ", ".join(sources) if sources else "none"
        yield Diagnostic.at(A44602, f"an inline trigger names exactly one of event, cron, webhook, manual "
                                    f"(found: {what})", src.path, src.span(path, key=True),
                            hint="use `triggers:` with one entry per source")
        return
    kind = sources[0]
    if kind == "cron" and trig.tz is None and not (isinstance(written, dict) and "tz" in written):
        yield Diagnostic.at(A44600, "schedule trigger has no 'tz'; the cron is read in local time of a "
                                    "mandatory IANA zone", src.path, src.span(path + ("cron",), key=True),
                            hint="add e.g. `tz: America/Sao_Paulo`")
    wrong = [k for k in _SCHEDULE_ONLY if kind != "cron" and getattr(trig, k) is not None]
    wrong += [k for k in _EVENT_ONLY if kind != "event" and getattr(trig, k) is not None]
    for k in wrong:
        yield Diagnostic.at(A44603, f"{k!r} does not apply to {'an' if kind[0] in 'aeiou' else 'a'} {kind} trigger", src.path,
                            src.span(path + (k,), key=True))


def _duplicates(project: Project) -> Iterator[Diagnostic]:
    for kind in ("trigger", "connector", "queue"):
        seen: dict[str, Decl[Any]] = {}
        for decl in project.of_kind(kind):
            oid = decl.model.id
            if oid in seen:
                first = seen[oid]
                yield Diagnostic.at(A44601, f"{kind} id {oid!r} is already declared in {first.src.path}:"
                                            f"{first.src.span(first.path + ('id',)).line}", decl.src.path,
                                    decl.src.span(decl.path + ("id",)))
            else:
                seen[oid] = decl
    from ..project import workflow_id

    seen_wf: dict[str, Decl[Any]] = {}
    for decl in project.of_kind("workflow"):
        if not decl.named:
            continue
        wid = workflow_id(decl.model.name)
        if wid in seen_wf:
            first = seen_wf[wid]
            yield Diagnostic.at(A44601, f"workflow {decl.model.name!r} ({wid}) is already declared in "
                                        f"{first.src.path}", decl.src.path, decl.src.span(decl.path + ("name",)))
        else:
            seen_wf[wid] = decl
