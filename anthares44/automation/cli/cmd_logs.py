"""`a44 automation logs RUN [--follow]`: the run's step attempts, or, with `--follow`, its event stream.

Without --follow, one row per attempt in the order they started (compensations are rows too, KIND
`compensation`):

    run_01K0H3Q5Z8W6T3N2C4B7D9F1GH  wf_invoice_settle v3  succeeded
    STEP           ATTEMPT  KIND    STATUS     ERROR           DURATION  STARTED
    reserve-funds  1        action  failed     E_UPSTREAM_503  120ms     2026-07-19 14:02:11Z

With --follow, every event of the run from its creation on, one line each, as it is recorded (LISTEN/NOTIFY, no
polling); the command returns when the run reaches a terminal state. `--format json` prints one JSON document,
or with --follow one JSON object per line. Exit 0 (whatever the run's outcome: `run --wait` is the verb that
judges it), 1 database error or no such run, 2 usage error.

`a44 automation logs query [--error-code E] [--step S] [--partition-key K] [--workflow WF] [--since 7d]
[--until T] [--limit N] [--after CURSOR] [--archive]` searches the attempts of every run of the project (`logs
query --help`); `a44 automation logs archive [--dry-run]` runs the log retention once (`logs archive --help`).
"""

from __future__ import annotations

import argparse

from ..errors import E_RUN_CANCELLED, EXIT_OK
from .output import (
    ArgParser,
    add_common_options,
    add_target_options,
    json_document,
    json_line,
    ms,
    rows_text,
    run_api,
    table,
    when,
    write,
)


class LogsParser(ArgParser):
    """`logs RUN` keeps its positional run id; `logs query ...` and `logs archive ...` are parsed by parsers of
    their own (a run id never reads `query` or `archive`: ids start with `run_`)."""

    actions: dict[str, argparse.ArgumentParser] = {}

    def parse_known_args(self, args=None, namespace=None):
        args = list(args or [])
        if args and args[0] in self.actions:
            return self.actions[args[0]].parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("logs", help="print a run's step attempts; --follow streams until it ends",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--follow", "-F", action="store_true", help="stream new events until the run ends")
    add_common_options(p)
    add_target_options(p)
    p.__class__ = LogsParser
    from . import cmd_logs_query

    p.actions = {"query": cmd_logs_query.build_parser(), "archive": cmd_logs_query.build_archive_parser()}
    return p


def run(args: argparse.Namespace) -> int:
    if getattr(args, "logs_action", None) is not None:
        from . import cmd_logs_query

        return cmd_logs_query.run(args)
    return run_api(_follow if args.follow else _logs, args)


async def _logs(auto, args) -> int:
    run = await auto.get_run(args.run_id)
    attempts = await auto.logs(args.run_id)
    if args.format == "json":
        write(json_document({"run": run, "attempts": attempts}))
        return EXIT_OK
    from ..app.flow import paused_on

    fanned = any("[" in a["step_id"] for a in attempts)       # a fan-out step's partitions ran: `step[key]`
    text = render_text(run, attempts, (await auto.partitions(args.run_id))["partitions"] if fanned else ())
    waits = paused_on(run, attempts)                           # a run that waits says on what (docs/flow.md)
    if waits:
        head, _, rest = text.partition("\n")
        text = f"{head}\nwaiting on {waits}\n{rest}"
    write(text)
    return EXIT_OK


def partitions_line(run_id: str, partitions) -> str:
    """`partitions of load-day: success 28, failed 1, timeout 1 (a44 automation partitions RUN)`, per step."""
    by_step: dict[str, dict[str, int]] = {}
    for p in partitions:
        counts = by_step.setdefault(p["step_id"], {})
        counts[p["state"]] = counts.get(p["state"], 0) + 1
    return "".join(f"partitions of {step}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items()))
                   + f" (a44 automation partitions {run_id})\n" for step, c in by_step.items())


def timers_text(run: dict) -> str:
    """`sleeping: STEP until INSTANT`, one line per open sleep of the run (§19: the instant stored when it opened)."""
    return "".join(f"sleeping: {t['step_id']} until {when(t['due_at'])}\n" for t in run.get("timers") or ())


def render_text(run: dict, attempts: list[dict], partitions=()) -> str:
    out = f"{run['run_id']}  {run['workflow_id']} v{run['version']}  {run['state']}"
    if run.get("error_code"):
        out += f"  {run.get('failed_step') or '-'} {run['error_code']}"
    out += "\n"
    if run.get("error_code") == E_RUN_CANCELLED and run.get("error_message"):   # who and why (states.md#cancel)
        out += run["error_message"] + ("\n" if run["state"] == "cancelled" else " (requested)\n")
    open_approvals = {a["step_id"]: a for a in run.get("approvals") or () if a["state"] == "open"}
    for w in run.get("waits") or ():       # what a waiting run waits on (docs/waits.md)
        if w["state"] == "open" and w["step_id"] in open_approvals:      # and who may decide (approvals.md)
            from ..app.approvals import waiting_text

            out += f"waiting on {waiting_text(open_approvals[w['step_id']])} until {w['timeout_at']}\n"
        elif w["state"] == "open":
            out += f"waiting on {w['kind']} {w['key']} (step {w['step_id']}) until {w['timeout_at']}\n"
    counted = (run.get("summary") or {}).get("step_rows") or {}
    if counted:
        # the summary is jsonb (keys come back reordered): list the steps in the order they started
        order = list(dict.fromkeys(a["step_id"] for a in attempts if a["step_id"] in counted))
        order += [s for s in counted if s not in order]
        steps = ", ".join(f"{sid} {rows_text(counted[sid])}" for sid in order)
        out += f"rows in/out/err: {rows_text(run.get('rows'))}  ({steps})\n"
    out += timers_text(run)
    out += partitions_line(run["run_id"], partitions)
    if not attempts:
        return out + "(no attempts yet)\n"
    attempts = sorted(attempts, key=lambda a: a.get("epoch") or 0)   # stable: start order within an epoch
    rows = [(a["step_id"], a["attempt"], a["kind"], a["status"], a["error_code"], ms(a["duration_ms"]),
             when(a["started_at"])) for a in attempts]
    if any(a.get("epoch") for a in attempts):   # replayed (§13): one epoch per replay, reused results marked
        rows = [(a.get("epoch") or 0, *r[:3], r[3] + (" (reused)" if a.get("worker_id") == "reused" else ""), *r[4:])
                for a, r in zip(attempts, rows)]
        return out + table(("epoch", "step", "attempt", "kind", "status", "error", "duration", "started"), rows)
    return out + table(("step", "attempt", "kind", "status", "error", "duration", "started"), rows)


async def _follow(auto, args) -> int:
    async for event in auto.follow(args.run_id):
        write(json_line(event) if args.format == "json" else event_line(event))
    return EXIT_OK


def event_line(e: dict) -> str:
    """`14:02:11.884  attempt.finished  reserve-funds #1 failed E_UPSTREAM_503 (120ms)`"""
    from ..jsonenc import iso

    data = e.get("data") or {}
    at = iso(e["at"])[11:23]
    kind = e["kind"]
    if kind.startswith("attempt."):
        what = f"{e['step_id']} #{e['attempt']}"
        if data.get("kind") == "compensation":
            what += " (compensation)"
        if kind == "attempt.finished":
            what += f" {e['status']}"
            if e.get("error_code"):
                what += f" {e['error_code']}"
            if data.get("duration_ms") is not None:
                what += f" ({ms(data['duration_ms'])})"
    else:
        parts = [e.get("state"), e.get("step_id"), e.get("error_code"), e.get("message")]
        what = " ".join(str(p) for p in parts if p)
        if kind == "run.created" and data.get("version") is not None:
            what += f" (version {data['version']})"
    return f"{at}  {kind:<17} {what}".rstrip() + "\n"
