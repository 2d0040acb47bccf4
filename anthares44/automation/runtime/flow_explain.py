"""What holds a run back (§22 `runs explain RUN`, docs/flow.md "Why queued"): for each limit of the run, its key
(`input.tenant=acme`), its use now (`5/5`, live holders counted from the runs, as the claim counts them), whether
it is full, since when this run waits behind it, its oldest holder, how many runs of the key wait before this one,
and for a throttle the tokens left and the instant of the next one; also the queue's and the workflow's caps when
they are full. Read-only; every instant from the store's clock."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..compiler.ir import load_workflow_ir
from ..errors import E_RUN_NOT_FOUND, A44Error

WAITING_STATES = ("pending", "waiting", "sleeping")


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def next_token(bucket: dict, now: datetime) -> tuple[float, datetime]:
    """A throttle bucket's tokens at `now` and the instant the next whole token is there (now when one is)."""
    per_token_ms = bucket["per_ms"] / bucket["max_n"]
    elapsed_ms = (now - bucket["refilled_at"]).total_seconds() * 1000
    tokens = min(float(bucket["burst"]), bucket["tokens"] + elapsed_ms / per_token_ms)
    if tokens >= 1:
        return tokens, now
    return tokens, now + timedelta(milliseconds=(1.0 - tokens) * per_token_ms)


async def explain(store, project: str, run_id: str) -> dict[str, Any]:
    now = store.clock.now()
    run = await store.fetchrow("flow_explain_run", run_id=run_id, project=project)
    if run is None:
        raise A44Error(E_RUN_NOT_FOUND, f"no run {run_id} in {project}", hint="`a44 automation runs` lists the runs")
    version = await store.get_version(project, run["workflow_id"], run["version"])
    flow = load_workflow_ir(version["ir"]).flow
    waiting = run["state"] in WAITING_STATES and run["lease_owner"] is None
    limits: list[dict[str, Any]] = []
    for i, key in enumerate(run["flow_keys"] or ()):
        value = key.split("=", 1)[1]
        expr = _concurrency_cel(flow, key, i)
        k = await store.fetchrow("flow_explain_key", project=project, key=key, seq=run["seq"])
        cap = run["flow_caps"][i]
        fairness = key.startswith("f:")
        # a holdWhileWaiting key is this run's own slot while it is started: it holds it, it does not wait for it
        holds = run["lease_owner"] is not None or (bool(run["flow_hold"][i]) and run["state"] != "pending")
        limits.append({
            "kind": "fairness" if fairness else "concurrency", "key": key, "expression": expr, "value": value,
            "in_use": k["in_use"], "limit": None if fairness else cap,
            "use": f"{expr}={value} {k['in_use']}" + ("" if fairness else f"/{cap}"),
            "full": not fairness and k["in_use"] >= cap, "hold_while_waiting": bool(run["flow_hold"][i]),
            "holding": holds, "since": _iso(run["flow_parked_at"]) if waiting and not holds else None,
            "oldest_holder": {"run_id": k["oldest_run_id"], "since": _iso(k["oldest_since"])}
            if k["oldest_run_id"] else None,
            "position": k["ahead"] + 1 if waiting and not holds else None})
    if run["flow_throttle"]:
        b = await store.fetchrow("flow_explain_bucket", project=project, key=run["flow_throttle"])
        if b is not None:
            tokens, at = next_token(dict(b), now)
            cel = flow.throttle.key.cel if flow is not None and flow.throttle is not None else "key"
            limits.append({"kind": "throttle", "key": b["key"], "expression": cel, "value": b["value"],
                           "use": f"{cel}={b['value']} {b['max_n']} per {b['per_ms'] / 1000:g}s, "
                                  f"{tokens:.2f} tokens",
                           "limit": b["max_n"], "per_ms": b["per_ms"], "burst": b["burst"],
                           "tokens": round(tokens, 3), "full": tokens < 1, "next_token_at": _iso(at)})
    caps = await store.fetchrow("flow_explain_caps", project=project, queue=run["queue"],
                                workflow_id=run["workflow_id"], version=run["version"])
    for kind, key, used, cap in (("queue", run["queue"], caps["queue_in_use"], caps["queue_cap"]),
                                 ("workflow", run["workflow_id"], caps["workflow_in_use"], caps["workflow_cap"])):
        if cap is not None and used >= cap:
            limits.append({"kind": kind, "key": key, "use": f"{key} {used}/{cap}", "in_use": used, "limit": cap,
                           "full": True})
    holding = [lim for lim in limits if lim.get("full") and not lim.get("holding")] if waiting else []
    return {"run_id": run_id, "state": run["state"], "workflow_id": run["workflow_id"], "queue": run["queue"],
            "priority": run["priority"], "created_at": run["created_at"], "due_at": run["next_wake_at"],
            "keyed": run["flow_keyed"] is not False, "held_back": bool(holding), "limits": limits, "pause": None,
            "at": now}


def _concurrency_cel(flow, key: str, i: int) -> str:
    if flow is None:
        return "key"
    if key.startswith("f:"):
        return flow.fairness.key.cel if flow.fairness is not None else "key"
    return flow.concurrency[i].key.cel if i < len(flow.concurrency) else "key"
