"""The one place visit strategies and step kinds are registered.

A visit's strategy is chosen by the IR's kind: `workflow` (YAML: a DAG of steps, dag_visit.py) or `code` (a Python
workflow, §12, code_visit.py). Inside a DAG, a node kind that calls no connector is handed to its step kind
(sleeps.py for `sleep`, waits.py for `wait`, children.py for `child`). Adding one (a timer, a wait for a signal or an approval, a child workflow) is a module
implementing `Strategy` or `StepKind` (visit.py) and one line here; the driver (interpreter.py) does not change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .approvals import Approval
from .children import Child
from .code_visit import CodeVisit
from .dag_visit import DagVisit
from .sleeps import Sleep
from .visit import StepKind, Strategy, Visit
from .waits import Wait

STEP_KINDS: dict[str, StepKind] = {"sleep": Sleep(), "wait": Wait(), "child": Child(), "approval": Approval()}

STRATEGIES: dict[str, Callable[[Visit], Awaitable[Strategy]]] = {
    "workflow": lambda v: DagVisit.load(v, STEP_KINDS),
    "code": CodeVisit.load,
}


async def load(v: Visit) -> Strategy:
    """The visit's strategy for its run's IR kind, built complete from what it reads of the run."""
    return await STRATEGIES[v.run.ir.kind](v)
