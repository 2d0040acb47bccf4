"""Timer rules (§19): a sleep block says `for` or `until` (not both), a static `until` is an instant with its offset,
and every static sleep and timeout, and the workflow's own `timeout`, fits in the run's `maxDuration` (default
72 h), so a run is refused at publish instead of failing with E_SLEEP_EXCEEDS_RUN_DEADLINE days later.

A templated `until` is checked by the template rules (rules/templates.py) and, once rendered, by the runtime
(E_SLEEP_INVALID).
A `for` counts at its longest (31-day months, 366-day years, an hour of DST unless in UTC): a span that fits only
in some months does not fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...calendar import CalendarError, parse_instant, parse_span
from ...diagnostics import Diagnostic, register
from ..ir import RUN_DEADLINE_MS
from ..models.workflow import Sleep, Wait
from ..templating import is_template

if TYPE_CHECKING:
    from ..documents import Decl
    from ..models.workflow import Step, Workflow
    from ..project import Project
    from ..source import Path, SourceFile

A44214 = register("A44214", "a sleep or timeout cannot fit in the run's maxDuration")
A44215 = register("A44215", "sleep until is not an instant with a UTC offset")
A44216 = register("A44216", "a sleep block needs exactly one of for or until")


def run_deadline_ms(wf: Workflow) -> int:
    """The run's wall-clock limit: `timeout` when shorter than `maxDuration` (default 72 h). The IR's deadline_ms."""
    most = wf.maxDuration or RUN_DEADLINE_MS
    return min(wf.timeout or most, most)


def _text(ms: int) -> str:
    """`2_682_000_000` -> `31d1h`: the duration grammar's own form, largest units first."""
    out = ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, ms = divmod(ms, size)
        out += f"{count}{unit}" if count else ""
    return out or "0s"


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        src, wf = decl.src, decl.model
        for i, step in enumerate(wf.steps):
            if isinstance(step.sleep, Sleep):
                yield from _block(src, decl.path + ("steps", i, "sleep"), step.id, step.sleep,
                                  decl.written("steps", i, "sleep"))
        # a `maxDuration` set aside as wrong (and reported) leaves no limit to measure against
        if wf.maxDuration is None and decl.written("maxDuration") is not None:
            continue
        yield from _fits(decl, src, wf)


def _fits(decl: Decl[Workflow], src: SourceFile, wf: Workflow) -> Iterator[Diagnostic]:
    # measured against maxDuration, not a shorter workflow `timeout`: a file published before maxDuration existed
    # (a 6h step under a 2h run timeout, say) must stay publishable; such a run still fails with E_RUN_DEADLINE
    most = wf.maxDuration or RUN_DEADLINE_MS
    by = f"maxDuration {_text(most)}" if wf.maxDuration else "maxDuration 72h (the default)"
    hint = "raise the workflow's `maxDuration` (at most 400d) or shorten it"
    if wf.timeout is not None and wf.timeout > most:
        yield Diagnostic.at(A44214, f"the workflow's timeout {_text(wf.timeout)} is longer than its maxDuration "
                                    f"{_text(most)}", src.path, src.span(decl.path + ("timeout",)),
                            hint="raise `maxDuration` (at most 400d) or shorten the timeout")
        return
    for i, step in enumerate(wf.steps):
        path = decl.path + ("steps", i)
        longest, key = _longest(step)
        if longest is not None and longest > most:
            span = step.sleep.for_ if isinstance(step.sleep, Sleep) else None
            what = f"sleep {span}" if key == "for" else f"{key} {_text(longest)}"
            most_text = f" (up to {_text(longest)})" if key == "for" else ""
            yield Diagnostic.at(A44214, f"{what} of step {step.id!r}{most_text} cannot fit in the run's {by}",
                                src.path, src.span(path + _where(key)),
                                hint=hint)


def _where(key: str) -> tuple[str, ...]:
    return {"for": ("sleep", "for"), "wait timeout": ("wait", "timeout"),
            "approval timeout": ("approval", "timeout")}.get(key, (key,))


def _longest(step: Step) -> tuple[int | None, str]:
    """The longest static span of a step (its sleep's, its wait's timeout, else its timeout) and what it is."""
    if isinstance(step.sleep, int):
        return step.sleep, "sleep"
    if isinstance(step.wait, Wait):   # a wait's own timeout (§20); `any` without one ends with the run
        return step.wait.timeout, "wait timeout"
    if step.approval is not None:   # an approval's own timeout (§20, docs/approvals.md)
        return step.approval.timeout, "approval timeout"
    if isinstance(step.sleep, Sleep) and step.sleep.for_ is not None:
        try:
            return int(parse_span(step.sleep.for_).longest(step.sleep.tz).total_seconds() * 1000), "for"
        except CalendarError:   # the model reported it
            return None, "for"
    return step.timeout, "timeout"


def _block(src: SourceFile, path: Path, step_id: str, s: Sleep, written: Any) -> Iterator[Diagnostic]:
    given = written.keys() if isinstance(written, dict) else set()
    has_for, has_until = s.for_ is not None or "for" in given, s.until is not None or "until" in given
    if has_for == has_until:
        what = "both" if has_for else "neither"
        yield Diagnostic.at(A44216, f"the sleep of step {step_id!r} has {what} of 'for' and 'until'", src.path,
                            src.span(path, key=True),
                            hint="give `for: 1mo` (with `tz:`) or `until: \"2026-07-01T09:00:00-03:00\"`")
    if s.until is None:
        return
    for key in ("tz", "dstPolicy"):
        if key in given:
            yield Diagnostic.at(A44216, f"the sleep of step {step_id!r} sets {key!r} with 'until'; an instant "
                                        f"with its offset needs no zone", src.path,
                                src.span(path + (key,), key=True), hint=f"remove {key!r}, or sleep `for` a span")
    if not is_template(s.until):
        try:
            parse_instant(s.until)
        except CalendarError as exc:
            yield Diagnostic.at(A44215, f"the sleep of step {step_id!r}: {exc}", src.path,
                                src.span(path + ("until",)),
                                hint="write the instant with its offset, e.g. 2026-07-01T09:00:00-03:00")
