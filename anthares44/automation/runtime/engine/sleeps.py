"""The durable `sleep` step of a YAML workflow (§3.5, node kind `sleep`): a step kind (visit.py `StepKind`) the DAG
strategy hands the step to instead of calling a connector.

A sleep is a `running` attempt whose end is started_at + sleep_ms: the first look starts it, and while it is not
over the run is released to `sleeping` until its end (no worker, lease or slot held); the first look at or after
the end finishes it `succeeded`. A new lease does not find it interrupted, a cancel ends it `cancelled`, the run's
deadline fails it (dag_visit.py). A timers module that replaces this one registers under the same node kind in
strategies.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .progress import Progress, StepProgress
from .states import SLEEPING
from .visit import Visit


class Sleep:
    """`StepKind` of node kind `sleep`."""

    def advance(self, v: Visit, p: Progress, sp: StepProgress, now: datetime, dues: list[tuple[datetime, str]]) -> bool:
        b = v.batch
        a = sp.last if sp.state == "running" else None
        if a is None:
            a = b.start(sp.node.id, sp.next_attempt, "action", now)
            p.add(a)
        end = a.started_at + timedelta(milliseconds=sp.node.sleep_ms or 0)
        if now >= end:
            b.finish(a, "succeeded", now)
            p.finished(a)
            return True
        dues.append((end, SLEEPING))
        return False
