"""Replay fixtures: a run's recorded history as JSON, replayed against the workflow code without a database.

    {"workflow": "tenant-onboard", "version": 4, "run_id": "run_...", "idempotency_key": "...", "input": {...},
     "now": "2026-07-19T14:03:00Z",
     "history": [{"step_id": "create-tenant", "kind": "action", "attempt": 1, "status": "succeeded",
                  "started_at": "...", "finished_at": "...", "result": {...}}, ...]}

`replay_fixture(wf, doc)` runs the function through the history (steps return their recorded results, ctx values
come from the log) and reports how it ends: `completed` (with the result), `continues` (the code asks for a step
the history has no outcome for: what a live run would execute next), `suspended`, `failed`, or
`nondeterministic` (expected vs observed). `export_history(store, run_id)` writes such a document from a real run.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from ..attempts import Attempt
from .core import Execution, History, Host, NonDeterministic, StepFailed, Suspend, WorkflowDef, _iso


def _dt(v):
    return None if v is None else datetime.fromisoformat(str(v).replace("Z", "+00:00"))


class _Continues(BaseException):
    def __init__(self, step_id: str):
        super().__init__(step_id)
        self.step_id = step_id


class _FixtureHost(Host):
    def __init__(self, now: datetime):
        self._now = now
        self._rng = random.Random(0)
        self.values: dict[str, Any] = {}

    def now(self):
        return self._now

    def rng(self):
        return self._rng

    async def start(self, step_id, attempt):
        raise _Continues(step_id)

    async def open_sleep(self, step_id, attempt, due):
        raise _Continues(step_id)

    async def finish(self, a, status, **kw):  # pragma: no cover - start never returns
        raise AssertionError

    def expire(self, a):
        pass

    def record_value(self, key, value):
        self.values[key] = value

    async def plan(self, plan_id, name, spec, attempt):
        raise _Continues(plan_id)


def history_of(doc: dict) -> History:
    return History.of([Attempt(h["step_id"], h.get("kind", "action"), h.get("attempt", 1), h["status"],
                               _dt(h.get("started_at")) or datetime.fromtimestamp(0).astimezone(),
                               _dt(h.get("finished_at")), h.get("error_code"), h.get("error_message"),
                               h.get("result"), _dt(h.get("retry_at"))) for h in doc["history"]])


async def replay_fixture(wf: WorkflowDef, doc: dict) -> dict:
    times = [_dt(h.get("finished_at")) for h in doc["history"] if h.get("finished_at")]
    now = _dt(doc.get("now")) or (max(times) if times else datetime.now().astimezone())
    host = _FixtureHost(now)
    x = Execution(wf, history_of(doc), host, run_id=doc.get("run_id", "run_fixture"),
                  idempotency_key=doc.get("idempotency_key", "fixture"), input=doc.get("input"))
    try:
        result = await x.run()
        return {"outcome": "completed", "result": result, "steps": x.completed}
    except _Continues as c:
        return {"outcome": "continues", "next": c.step_id, "steps": x.completed}
    except Suspend as s:
        return {"outcome": "suspended", "until": _iso(s.due), "state": s.state, "steps": x.completed}
    except StepFailed as f:
        return {"outcome": "failed", "step": f.step_id, "error_code": f.code, "steps": x.completed}
    except NonDeterministic as e:
        return {"outcome": "nondeterministic", "error_code": e.code, "expected": e.expected, "observed": e.observed,
                "message": e.message}


async def export_history(store, run_id: str) -> dict:
    """The fixture document of a run's current epoch (attempts in log order)."""
    run = await store.get_run(run_id)
    rows = await store.fetch("code_attempts_of_run", run_id=run_id, epoch=run["epoch"])
    hist = []
    for r in rows:
        item = {"step_id": r["step_id"], "kind": r["kind"], "attempt": r["attempt"], "status": r["status"],
                "started_at": _iso(r["started_at"]),
                "finished_at": _iso(r["finished_at"]) if r["finished_at"] else None}
        if r["status"] == "succeeded":
            item["result"] = store.load_result(dict(r))
        if r["error_code"]:
            item.update(error_code=r["error_code"], error_message=r["error_message"])
        if r["retry_at"]:
            item["retry_at"] = _iso(r["retry_at"])
        hist.append(item)
    return {"workflow": run["workflow_id"], "version": run["version"], "run_id": run_id,
            "idempotency_key": run["idempotency_key"], "input": run["input"], "history": hist}
