"""The replay gate of a code workflow (`a44 automation verify`, docs/verify.md): one recorded history replayed
against new code with zero connector calls, and the first step where the two part.

Every step the history recorded returns its recorded result (a failure its recorded failure); the body of a step
is never called. A call the history does not have is where the replay stops: for a history that ended (the run
succeeded, ended partial or failed) the new code asking for anything more is a divergence; for a run still open
(or cancelled) it is the frontier, what a live visit would run next, and fine. A different step id at a recorded
position, or the code returning while the history has more steps, is a divergence wherever it happens.

Histories come as `runs export` writes them (`{"run": {...}, "attempts": [...]}`, app/exports.py) or as replay
fixtures (`{"workflow", "history": [...]}`, fixtures.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ..attempts import Attempt
from .core import Execution, History, NonDeterministic, StepFailed, Suspend, WorkflowDef
from .fixtures import _Continues, _FixtureHost

ENDED = frozenset({"succeeded", "partial", "failed", "compensation_failed"})   # the history holds the whole run
COMPLETED = frozenset({"succeeded", "partial"})


@dataclass(frozen=True)
class Replayed:
    """How one history replayed: `divergent` False, or the first divergent step (position counts steps from 1, as
    E_NONDETERMINISTIC_REPLAY does; `history_has` / `code_asked`: a step id, or None for the run's end)."""
    run_id: str
    workflow: str
    version: int | None
    state: str | None
    divergent: bool
    step: str | None = None
    position: int | None = None
    history_has: str | None = None
    code_asked: str | None = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Frontier(BaseException):
    """The code reached what the history is still waiting on (a child run, a sleep's end)."""


class _ReplayHost(_FixtureHost):
    """The fixture replayer's `Host` (a call the history has no outcome for raises `_Continues`), that never
    calls anything for a child step or a sleep's end either: recorded outcomes only."""

    async def start_child(self, step_id, attempt, spec):
        raise _Continues(step_id)

    async def child_outcome(self, step_id, a, spec):
        raise _Frontier()

    async def finish(self, a, status, **kw):
        raise _Frontier()


def _dt(v: Any) -> datetime | None:
    if v is None or v == "":
        return None
    got = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    return got if got.tzinfo is not None else got.replace(tzinfo=UTC)


def parse(doc: Any) -> tuple[dict, list[dict]]:
    """(run, attempts of the run's current epoch in log order) of an exported history or a replay fixture;
    ValueError (a message naming what is missing) for anything else."""
    if not isinstance(doc, dict):
        raise ValueError("a history is a JSON object")
    if isinstance(doc.get("run"), dict) and isinstance(doc.get("attempts"), list):
        run, attempts = doc["run"], doc["attempts"]
        epoch = run.get("epoch")
        attempts = [a for a in attempts if epoch is None or not isinstance(a, dict) or a.get("epoch", epoch) == epoch]
    elif isinstance(doc.get("history"), list):
        run = {"run_id": doc.get("run_id"), "workflow_id": doc.get("workflow"), "version": doc.get("version"),
               "state": doc.get("state"), "input": doc.get("input"), "idempotency_key": doc.get("idempotency_key")}
        attempts = doc["history"]
    else:
        raise ValueError('a history has "run" and "attempts" (runs export) or "history" (a replay fixture)')
    for a in attempts:
        if not isinstance(a, dict) or not isinstance(a.get("step_id"), str) or not isinstance(a.get("status"), str):
            raise ValueError("every attempt needs a step_id and a status")
    if not isinstance(run.get("workflow_id"), str | None):
        raise ValueError("run.workflow_id must be a string")
    return run, attempts


def history_of(attempts: list[dict]) -> History:
    try:
        return History.of([Attempt(a["step_id"], a.get("kind") or "action", int(a.get("attempt") or 1),
                                   a["status"], _dt(a.get("started_at")) or datetime.fromtimestamp(0, UTC),
                                   _dt(a.get("finished_at")), a.get("error_code"), a.get("error_message"),
                                   a.get("result"), _dt(a.get("retry_at")), None, _dt(a.get("due_at")))
                           for a in attempts])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"an attempt is malformed: {exc}") from None


def _latest(run: dict, attempts: list[dict]) -> datetime:
    times = [t for t in (_dt(a.get("finished_at")) or _dt(a.get("started_at")) for a in attempts) if t is not None]
    times += [t for t in (_dt(run.get("finished_at")),) if t is not None]
    return max(times) if times else datetime.fromtimestamp(0, UTC)


async def replay_history(wf: WorkflowDef, doc: Any) -> Replayed:
    """Replay one history (exported or fixture) against `wf`; ValueError for a document that is not one."""
    run, attempts = parse(doc)
    history = history_of(attempts)
    state = run.get("state")
    ended = state in ENDED
    x = Execution(wf, history, _ReplayHost(_latest(run, attempts)), run_id=str(run.get("run_id") or "run_replay"),
                  idempotency_key=str(run.get("idempotency_key") or "replay"), input=run.get("input"))
    base: dict[str, Any] = {"run_id": str(run.get("run_id") or "?"), "workflow": str(run.get("workflow_id") or wf.workflow_id),
            "version": run.get("version"), "state": state}

    def diverged(step, position, has, asked, message) -> Replayed:
        return Replayed(**base, divergent=True, step=step, position=position, history_has=has, code_asked=asked,
                        message=message)

    ends = "the run ending " + (state or "")
    try:
        await x.run()
    except NonDeterministic as e:
        return diverged(e.observed or e.expected, e.details.get("position"), e.expected, e.observed, e.message)
    except _Continues as c:
        if ended:
            return diverged(c.step_id, x.position, None, c.step_id,
                            f"the history has {ends.strip()} after step #{x.position}; the code asked for a new "
                            f"call, step {c.step_id!r}")
    except (Suspend, _Frontier):
        pass
    except StepFailed as f:
        if state in COMPLETED:
            return diverged(f.step_id, x.position, None, f.step_id,
                            f"the history completed; the code failed at step {f.step_id!r} ({f.code})")
    except Exception as exc:  # noqa: BLE001 - the new code itself raised: a finding, not a crash of the gate
        if state in COMPLETED:
            return diverged(None, x.position, None, None,
                            f"the history completed; the code raised {type(exc).__name__}: {exc} after step "
                            f"#{x.position}")
    return Replayed(**base, divergent=False)
