"""Wait rules (§20, docs/waits.md): a `wait` block is a signal wait, an event wait or `any:` of branches that
each wait for one thing (a signal, an event, a sleep); every form but `any` has a timeout. An event
wait names how it is correlated with its run (`correlate: {run, event}`; `correlate: none` is a broadcast wait, a
warning); its `since` is `run_start`, `wait_open` or a lookback of at most 7d; its CEL parses and type-checks
against its roots (`correlate.run` the run's, `correlate.event` the envelope's, `if` both)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Literal

from ...diagnostics import Diagnostic, Severity, register
from ..graph import predecessors
from ..models.workflow import Wait
from .expressions import FILTER_ROOTS, IF_ROOTS, expression_diagnostics

if TYPE_CHECKING:
    from ..models.workflow import AnyBranch
    from ..project import Project
    from ..source import Path, SourceFile

A44218 = register("A44218", "wait needs exactly one of signal or event")
A44219 = register("A44219", "event wait has no correlate")
A44220 = register("A44220", "broadcast wait", Severity.WARNING)
A44221 = register("A44221", "bad since of an event wait")
A44222 = register("A44222", "wait has no timeout")

EVENT_IF_ROOTS = IF_ROOTS | {"event"}
MAX_LOOKBACK_MS = 7 * 86_400_000
EVENT_ONLY = ("correlate", "if", "since")


def since_of(text: str | None) -> tuple[Literal["run_start", "wait_open", "lookback"], int | None]:
    """(`run_start` | `wait_open` | `lookback`, lookback ms): `since` as lowered. Raises ValueError naming the
    accepted forms."""
    if text is None or text == "run_start":
        return "run_start", None
    if text == "wait_open":
        return "wait_open", None
    from ...durations import duration_ms

    if not text.startswith("-"):
        raise ValueError(f"since {text!r} is not run_start, wait_open or a lookback such as -15m")
    ms = duration_ms(text[1:])
    if ms <= 0 or ms > MAX_LOOKBACK_MS:
        raise ValueError(f"since {text!r} looks back more than 7d (or not at all)")
    return "lookback", ms


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        before = predecessors(decl.model)
        for i, step in enumerate(decl.model.steps):
            if isinstance(step.wait, Wait):   # (a string is a child step's `wait:`, rules/children.py's)
                yield from _wait(decl.src, decl.path + ("steps", i, "wait"), step.id, step.wait, before[step.id])


def _wait(src: SourceFile, path: Path, step_id: str, w: Wait, before: Collection[str]) -> Iterator[Diagnostic]:
    if w.any is not None:
        if w.signal is not None or w.event is not None:
            yield Diagnostic.at(A44218, f"the wait of step {step_id!r} has 'any' and a signal or event of its own",
                                src.path, src.span(path + ("any",), key=True),
                                hint="put every thing it waits for in `any:`")
        for i, b in enumerate(w.any):
            yield from _branch(src, path + ("any", i), step_id, b, before)
        return
    if w.timeout is None:
        yield Diagnostic.at(A44222, f"the wait of step {step_id!r} has no timeout", src.path,
                            src.span(path, key=True), hint="add e.g. `timeout: 7d` (only `any:` may go without)")
    yield from _one(src, path, step_id, w, before, "wait")


def _branch(src: SourceFile, path: Path, step_id: str, b: AnyBranch,
            before: Collection[str]) -> Iterator[Diagnostic]:
    given = [k for k in ("signal", "event", "sleep") if getattr(b, k) is not None]
    if len(given) != 1:
        yield Diagnostic.at(A44218, f"branch {path[-1]} of the `any` of step {step_id!r} has "
                                    f"{' and '.join(given) or 'none'} of signal, event, sleep", src.path,
                            src.span(path, key=False), hint="each branch waits for one thing: `{signal: NAME}`, "
                                                            "`{event: TYPE, correlate: ...}` or `{sleep: 3d}`")
        return
    if b.sleep is not None:
        for key in EVENT_ONLY:
            if getattr(b, "if_" if key == "if" else key) is not None:
                yield Diagnostic.at(A44218, f"a sleep branch of step {step_id!r} takes no {key!r}", src.path,
                                    src.span(path + (key,), key=True), hint=f"{key!r} belongs to an event branch")
        return
    yield from _one(src, path, step_id, b, before, "branch")


def _one(src: SourceFile, path: Path, step_id: str, w: Wait | AnyBranch, before: Collection[str],
         form: str) -> Iterator[Diagnostic]:
    if (w.signal is None) == (w.event is None):
        what = "both" if w.signal is not None else "neither"
        yield Diagnostic.at(A44218, f"the wait of step {step_id!r} has {what} of 'signal' and 'event'", src.path,
                            src.span(path, key=True), hint="wait for one thing: `signal: NAME` or `event: TYPE`; "
                                                           "several at once are `any:`")
        return
    if w.signal is not None:
        for key in EVENT_ONLY:
            if getattr(w, "if_" if key == "if" else key) is not None:
                yield Diagnostic.at(A44218, f"the signal {form} of step {step_id!r} takes no {key!r}", src.path,
                                    src.span(path + (key,), key=True), hint=f"{key!r} belongs to an event wait")
        return
    if w.correlate is None:
        yield Diagnostic.at(A44219, f"the event wait of step {step_id!r} does not say which event is its run's",
                            src.path, src.span(path + ("event",), key=True),
                            hint="add `correlate: {run: \"input.invoiceId\", event: \"data.invoiceId\"}`, or "
                                 "`correlate: none` when any event of the type will do")
    elif w.correlate == "none":
        yield Diagnostic.at(A44220, f"the event wait of step {step_id!r} is a broadcast wait: any {w.event} "
                                    "event satisfies it, in every run waiting", src.path,
                            src.span(path + ("correlate",), key=True),
                            hint="correlate it with its run unless every run should take every event")
    else:
        c = w.correlate
        yield from expression_diagnostics(src, path + ("correlate", "run"), c.run, IF_ROOTS, before,
                                          expect_bool=False)
        yield from expression_diagnostics(src, path + ("correlate", "event"), c.event, FILTER_ROOTS,
                                          expect_bool=False)
    if w.if_ is not None:
        yield from expression_diagnostics(src, path + ("if",), w.if_, EVENT_IF_ROOTS, before)
    try:
        since_of(w.since)
    except ValueError as exc:
        yield Diagnostic.at(A44221, f"the event wait of step {step_id!r}: {exc}", src.path,
                            src.span(path + ("since",), key=False),
                            hint="`since: run_start` (the default), `since: wait_open`, or `since: -15m` (at most -7d)")
