"""What an operator inspects a run with (the web console reads these; the CLI's `runs` and `logs` read their
simpler cousins on `Automation`): a keyset-paged, filtered search of runs with a bounded total, and one run in
full (attempts with their redacted results, the step graph of its version, its replays, its trace id).

    page = await search_runs(auto, RunSearch(state="failed", error_code="E_UPSTREAM_503"), limit=50)
    more = await search_runs(auto, RunSearch(state="failed"), limit=50, after=page["next"])
    doc = await run_detail(auto, "run_01J9...")
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timezone

from ..redact import redact
from ..runtime.store import RUN_STATES
from ..tracing import run_trace_id
from .automation import InvalidArgument, workflow_ref
from .logs import instant
from .views import attempt_view, run_view

TOTAL_CAP = 10_000       # the total is exact up to this many runs, "10,000+" beyond: counting millions is not free
MAX_PAGE = 500
__all__ = ["RUN_STATES", "RunSearch", "run_detail", "search_runs"]


@dataclass(frozen=True)
class RunSearch:
    """The runs page's filters; None leaves a filter out. `since` / `until` are ages (`24h`) or instants."""

    workflow: str | None = None
    state: str | None = None
    step: str | None = None
    error_code: str | None = None
    partition_key: str | None = None
    since: str | datetime | None = None
    until: str | datetime | None = None

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def encode_cursor(row: dict) -> str:
    """The position after `row` in the newest-first order: microseconds since the epoch and the run id."""
    at = row["created_at"]
    return f"{int(at.timestamp() * 1_000_000)}.{row['run_id']}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    us, _, run_id = cursor.partition(".")
    if not us.isdigit() or not run_id or len(us) > 19:
        raise InvalidArgument(f"bad page cursor {cursor!r}", hint="follow the page's `next` link")
    return datetime.fromtimestamp(int(us) / 1_000_000, tz=timezone.utc), run_id


async def search_runs(auto, search: RunSearch, *, limit: int = 50, after: str | None = None) -> dict:
    """{total, total_capped, runs, next}: runs newest first after the cursor `after`; `next` continues (None at
    the end). The total counts every match (not only this page's), exactly up to TOTAL_CAP."""
    if search.state is not None and search.state not in RUN_STATES:
        raise InvalidArgument(f"unknown run state {search.state!r}", hint=f"known states: {', '.join(RUN_STATES)}")
    if not 0 < limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be between 1 and {MAX_PAGE}")
    now = auto.store.clock.now()
    where = dict(project=auto.project, state=search.state,
                 workflow=workflow_ref(search.workflow) if search.workflow else None, step=search.step,
                 error_code=search.error_code, partition_key=search.partition_key,
                 since=instant("since", search.since, now) if search.since else None,
                 until=instant("until", search.until, now) if search.until else None)
    before_at, before_id = decode_cursor(after) if after else (None, None)
    total = await auto.store.fetchval("runs_search_count", **where, cap=TOTAL_CAP + 1)
    rows = [dict(r) for r in await auto.store.fetch("runs_search", **where, before_at=before_at,
                                                     before_id=before_id, limit=limit + 1)]
    more = len(rows) > limit
    rows = rows[:limit]
    return {"total": min(total, TOTAL_CAP), "total_capped": total > TOTAL_CAP, "runs": [run_view(r, now) for r in rows],
            "next": encode_cursor(rows[-1]) if more and rows else None}


async def run_detail(auto, run_id: str) -> dict:
    """{run, attempts, graph, epochs, trace_id}: the run (input/result redacted), every attempt with its result
    redacted by key name, the nodes and edges of the IR of the run's version, the replays it went through."""
    run = await auto.get_run(run_id)
    run["input"], run["result"] = redact(run.get("input")), redact(run.get("result"))
    store = auto.store
    attempts = []
    for row in await store.list_attempts(run_id):
        doc = attempt_view(row)
        doc["result"] = redact(store.load_result(row)) if row.get("result") is not None or row.get("result_ref") \
            else None
        attempts.append(doc)
    version = await store.get_version(auto.project, run["workflow_id"], run["version"])
    ir = version["ir"]
    graph = {"nodes": [{"id": n["id"], "kind": n.get("kind"), "index": n.get("index"),
                        "uses": (n.get("connector") or {}).get("uses")} for n in ir.get("nodes", [])],
             "edges": [list(e) for e in ir.get("edges", [])]}
    epochs = [{"at": r["at"], **(r["data"] if isinstance(r["data"], dict) else {})}
              for r in await store.fetch("run_epochs", run_id=run_id)]
    return {"run": run, "attempts": attempts, "graph": graph, "epochs": epochs,
            "trace_id": f"{run_trace_id(run_id):032x}"}
