"""The durable `sleep` step of a YAML workflow (§3.5b, §19, docs/timers.md): a step kind (visit.py `StepKind`) the
DAG strategy hands the step to instead of calling a connector.

A sleep is a `running` attempt with a due instant computed once, when it opens, and stored on the attempt
(`due_at`, migration 0034): `sleep_ms` after it opened, a `for` span in the wall time of its zone (calendar.due_for)
or an `until` instant (rendered then when it is a template). Every later look -- a new lease, a restart, a
redeploy, a replay that reuses the step -- reads the stored instant back and never computes it again. While it is
not due the run is released to `sleeping` (no worker, lease or slot held); the first look at or after it fires it:
one conditional transition (the lease fence, and the instant still the one read: a wake or reschedule in between
makes the fire write nothing), which records how late it fired. A cancel ends it `cancelled` (dag_visit.py).

A templated `until` that renders to no instant with an offset fails the step with E_SLEEP_INVALID, and an instant
past the run's deadline with E_SLEEP_EXCEEDS_RUN_DEADLINE, both at once and for good: a sleep is never cut short.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ...calendar import CalendarError, Span, due_for, parse_instant
from ...compiler.ir import NodeIR
from ...errors import E_SLEEP_EXCEEDS_RUN_DEADLINE, E_SLEEP_INVALID, A44Error
from ..render import render_params
from .dag_steps import Steps
from .progress import Progress, StepProgress
from .states import SLEEPING
from .visit import Visit

RENDER_BUDGET_S = 1.0      # a templated `until` is one small expression: it renders on the spot, bounded


def due_instant(node: NodeIR, opened_at: datetime, render: Callable[[object], object]) -> datetime:
    """When sleep `node` opened at `opened_at` is due (aware, UTC). `render` renders a templated `until`.
    A44Error E_SLEEP_INVALID when it gives no instant with an offset."""
    s = node.sleep
    if s is None:
        return opened_at + timedelta(milliseconds=node.sleep_ms or 0)
    if s.kind == "for":
        span = Span(months=s.months or 0, days=s.days or 0, ms=s.ms or 0)
        return due_for(opened_at, span, s.tz or "UTC", s.dst_policy or "skip-nonexistent")
    value = s.until if isinstance(s.until, str) else render(s.until)
    try:
        return parse_instant(value if isinstance(value, str) else str(value)).astimezone(UTC)
    except CalendarError as exc:
        raise A44Error(E_SLEEP_INVALID, f"sleep {node.id}: `until` rendered to {value!r}: {exc}",
                       step_id=node.id) from None


class Render:
    """Renders a sleep's templated `until` over the step's template scope, within RENDER_BUDGET_S."""

    def __init__(self, v: Visit, p: Progress, sp: StepProgress):
        self.v, self.p, self.sp = v, p, sp

    def __call__(self, template: object) -> object:
        sp = self.sp
        scope = Steps(self.v, self.p).render_scope(sp.node.id, sp.next_attempt, sp)
        try:
            return render_params(template, scope, deadline=time.monotonic() + RENDER_BUDGET_S)
        except A44Error as err:
            raise A44Error(E_SLEEP_INVALID, f"sleep {sp.node.id}: `until` could not be rendered: {err.message}",
                           step_id=sp.node.id) from None


class Sleep:
    """`StepKind` of node kind `sleep`."""

    def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime, dues: list[tuple[datetime, str]]) -> bool:
        b = v.batch
        a = sp.last if sp.state == "running" else None
        if a is None:
            try:
                due = due_instant(sp.node, now, Render(v, p, sp))
                if due > v.run.deadline:
                    raise A44Error(E_SLEEP_EXCEEDS_RUN_DEADLINE,
                                   f"sleep {sp.node.id} would end at {due.isoformat()}, past the run's deadline "
                                   f"({v.run.deadline.isoformat()})", step_id=sp.node.id,
                                   hint="raise the workflow's maxDuration (at most 400d) or shorten the sleep")
            except A44Error as err:     # permanent: the step fails now, never cut short nor retried
                p.add(b.record(sp.node.id, sp.next_attempt, "action", "failed", now, error=err))
                return True
            a = b.start(sp.node.id, sp.next_attempt, "action", now)
            p.add(a)
            b.sleep_open(a, due)
        if a.due_at is None:        # opened before migration 0034 stored instants: its end as it was computed then
            end = a.started_at + timedelta(milliseconds=sp.node.sleep_ms or 0)
            if now < end:
                dues.append((end, SLEEPING))
                return False
            b.finish(a, "succeeded", now)
        elif now < a.due_at:
            dues.append((a.due_at, SLEEPING))
            return False
        else:
            b.sleep_fire(a, now)
        p.finished(a)
        return True
