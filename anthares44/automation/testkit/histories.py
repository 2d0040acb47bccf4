"""Real runs as fixtures: a history of `a44 automation runs export` (app/exports.py) run again under the kit.

`replay(env, history)` mocks each step's connector with what the far side answered in that run, attempt by attempt
(`Ok(result)` for a success, `Fail(code, message)` for a failure or a timeout), and starts a run of the workflow's
latest published version with the run's input: the new version meets the world exactly as the old one did. Steps
whose connector runs for real under the kit (`pass`, `sql/execute`, ...) run for real again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .mocks import LOCAL, Fail, Ok

if TYPE_CHECKING:
    from .env import Env, RunView

ANSWERED = ("succeeded", "failed", "timeout")     # attempts the far side answered (not cut off, not skipped)


def outcomes(history: dict, step_id: str) -> list[Ok | Fail]:
    """What the far side answered to each action attempt of `step_id`, in attempt order."""
    attempts = sorted((a for a in history["attempts"] if a["step_id"] == step_id and a["kind"] == "action"
                       and a["status"] in ANSWERED), key=lambda a: a["attempt"])
    return [Ok(a["result"]) if a["status"] == "succeeded" else Fail(a["error_code"], a["error_message"] or "")
            for a in attempts]


def replay(env: Env, history: dict, *, idempotency_key: str | None = None) -> RunView:
    run = history["run"]
    ir = env.call(env.store.latest_version(env.project, run["workflow_id"]))["ir"]
    for node in ir["nodes"]:
        uses = (node.get("connector") or {}).get("uses")
        if uses is None or uses in LOCAL:
            continue
        script = outcomes(history, node["id"])
        if script:
            env.mock(uses, *script, step=node["id"])
    return env.run(run["workflow_id"], run["input"], idempotency_key=idempotency_key)
