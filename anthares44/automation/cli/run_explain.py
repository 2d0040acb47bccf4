"""`a44 automation runs explain RUN [--format json]`: what holds a run back (§22, docs/flow.md "Why queued").

Prints one line for the run (state, whether it is held back), then one per limit: its kind, its use now
(`input.tenant=acme 5/5`), `FULL` when it holds the run back, since when the run waits behind it, the oldest
holder, the run's position among the key's waiting runs, a throttle's tokens and next token; and the paused flow
key it waits on, with its reason. Exit 0, 1 when the run does not exist.
"""

from __future__ import annotations

from ..errors import EXIT_OK
from .output import json_document, write


async def explain(auto, args) -> int:
    doc = await auto.explain(args.run_id)
    if args.format == "json":
        write(json_document(doc))
        return EXIT_OK
    write(render(doc))
    return EXIT_OK


def render(doc: dict) -> str:
    held = "held back" if doc["held_back"] else "not held back by a limit"
    out = [f"{doc['run_id']}  {doc['workflow_id']}  {doc['state']}: {held}  (priority {doc.get('priority', 5)})"]
    if not doc.get("keyed", True):
        out.append("  its flow keys are not computed yet (the next claim computes them)")
    for lim in doc["limits"]:
        line = f"  {lim['kind']:<11} {lim['use']}" + ("  FULL" if lim.get("full") else "")
        if lim.get("since"):
            line += f"  waiting since {lim['since']}"
        if lim.get("oldest_holder"):
            h = lim["oldest_holder"]
            line += f"  oldest holder {h['run_id']} (since {h['since']})"
        if lim.get("position"):
            line += f"  position {lim['position']}"
        if lim.get("next_token_at") and lim.get("full"):
            line += f"  next token {lim['next_token_at']}"
        out.append(line)
    pause = doc.get("pause")
    if pause:
        why = f" ({pause['reason']})" if pause.get("reason") else ""
        out.append(f"  paused      {pause.get('key') or pause['waiting_on']} until {pause.get('until')}{why}")
    if not doc["limits"] and not pause:
        out.append("  no flow limit, queue or workflow cap applies to it now")
    return "\n".join(out) + "\n"
