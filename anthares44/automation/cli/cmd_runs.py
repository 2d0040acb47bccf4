"""`a44 automation runs [--state S] [--workflow WF] [--step S] [--since 48h] [--limit N]`: list runs, the total first.

Prints `total: N`, then a table: RUN, WORKFLOW, VER, STATE, STEP, ERROR, CREATED, DURATION (docs/cli.md has examples).
STEP is the failed step, else the current one; DURATION runs from creation to the end (or to now while the run is
not finished). `--state` takes one of the run states of docs/store.md (a typo gets a did-you-mean); `--step`
matches runs whose current or failed step it is, or that attempted it; `--since` is an age (48h, 30m, 7d).
Exit 0 (even when nothing matches), 1 database error, 2 usage error.

`a44 automation runs RUN [--format json]` shows one run: its state, steps and, while it sleeps, each sleeping step
with the due instant stored when its sleep opened (`due_at`; the run as `GET /v1/automation/runs/{id}` answers).

`a44 automation runs explain RUN` says what holds a run back: each limit with its key and use (`input.tenant=acme
5/5`), since when, the oldest holder, the position, a throttle's next token, any pause and its reason.

`a44 automation runs resolve RUN --step S --outcome succeeded|failed|retry` settles an `exclusive` step whose lease
expired (the run waits in `awaiting_confirmation` until a person says what happened).

`a44 automation runs skip RUN --partition P [--step S] --reason TEXT` (or `--step S` alone) skips a partition or
step of a `partial` or `failed` run that failed for good, recording who (--by, default $USER) and why in the log;
a partial run with no failed partition left becomes `succeeded` (docs/partitions.md).

`a44 automation runs tree RUN` prints the tree of child workflows the run belongs to (docs/children.md), from its root.
`a44 automation runs cancel RUN [--reason TEXT] [--compensate]` cancels a run, recording who (--by, default $USER)
and why: at once when no worker holds it (pending, waiting, sleeping, awaiting_confirmation), else at the next
safe point of the daemon running it (its in-flight call is cancelled); --compensate undoes its completed steps
first. Cancelling a cancelled run says so (exit 0); a finished run refuses with E_CANCEL_NOT_ALLOWED (exit 1).

`a44 automation runs export --workflow WF [--since 14d] [--sample 500] > histories.jsonl` writes a random sample of
the workflow's finished runs, one history (the run and its attempts, redacted like results) per line: real runs to
keep as test fixtures (`--remote` too: GET /v1/automation/histories; `--format json`: one document
{"histories": [...]}).
`a44 automation runs migrate --workflow WF --to N [--from V] [--filter CEL] [--rate 50/s] [--dry-run]
[--allow-reexecute]` moves open runs of older versions to version N, each under its lock, audited in its log
(`run_version_changed`); a completed step is never run again unless --allow-reexecute (docs/deploys.md).
`a44 automation runs wake RUN --step S --reason TEXT` ends a sleeping step's timer now; `a44 automation runs
reschedule RUN --step S --until ISO [--reason TEXT]` moves its due instant (ISO 8601 with its offset; a past one
fires at once). Both record who (--by, default $USER) and why in the log (`timer.woken`, `timer.rescheduled`).
A step that is not an open sleep, or whose instant has come (its timer fires), refuses with E_TIMER_NOT_SLEEPING;
an instant past the run's deadline with E_SLEEP_EXCEEDS_RUN_DEADLINE (docs/timers.md).
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import (
    ArgParser,
    add_common_options,
    add_target_options,
    decided_by,
    json_document,
    ms,
    rows_text,
    run_api,
    table,
    warn_without_daemon,
    when,
    write,
)
from .run_migrate import add_migrate, migrate

OUTCOMES = ("succeeded", "failed", "retry")


class RunsParser(ArgParser):
    """`runs RUN` shows one run: a first argument that is a run id (`run_...`) reads as `runs show RUN`."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(args or [])
        if args and args[0].startswith("run_"):
            args.insert(0, "show")
        return super().parse_known_args(args, namespace)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("runs", help="list runs (total first) filtered by state, workflow, step, age",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state", metavar="S", help="run state, e.g. failed, compensation_failed, running")
    p.add_argument("--workflow", metavar="WF", help="workflow id or name")
    p.add_argument("--step", metavar="S", help="step id (current, failed or attempted)")
    p.add_argument("--since", metavar="AGE", help="created within this age: 48h, 30m, 7d")
    p.add_argument("--limit", type=_non_negative, default=50, metavar="N", help="rows to print (default 50; "
                   "the total counts every match)")
    add_common_options(p)
    add_target_options(p)
    actions = p.add_subparsers(dest="runs_action", metavar="ACTION", parser_class=type(p))
    _action(actions, "show", "one run, with its sleeping steps' due instants (also `runs RUN`)",
            "One run: state, version, steps, and each sleeping step's due instant.", by=None)
    _action(actions, "tree", "the tree of child workflows a run belongs to, with states",
            "The run's lineage (docs/children.md): its root and every child run below it, indented by depth, with the "
            "parent's step that started each, its workflow, version and state.", by=None)
    r = _action(actions, "resolve", "settle an exclusive step awaiting confirmation",
                "Tell the run what happened to an exclusive step whose lease expired: succeeded (its effect "
                "happened), failed (it did not: fail the step), retry (attempt it again).",
                by="who decided, recorded with the decision (default: $USER)")
    r.add_argument("--step", dest="resolve_step", required=True, metavar="S", help="the step awaiting confirmation")
    r.add_argument("--outcome", required=True, choices=OUTCOMES)
    k = _action(actions, "skip", "skip a permanently failed partition or step, saying why",
                "Mark a partition (or a step) that failed for good `skipped`, with who and why; a partial run "
                "with nothing failed left becomes succeeded.")
    k.add_argument("--partition", dest="skip_partition", metavar="P", help="the partition key, e.g. 2026-07-04")
    k.add_argument("--step", dest="skip_step", metavar="S", help="the step (needed when several steps have P)")
    k.add_argument("--reason", required=True, metavar="TEXT", help="why it is skipped (recorded in the log)")
    c = _action(actions, "cancel", "cancel a run (at once, or at the running step's next safe point)",
                "Cancel a run, saying why: a run no worker holds is cancelled at once; a running one at the "
                "daemon's next safe point (its in-flight call is cancelled). With --compensate its completed "
                "steps are undone first.")
    c.add_argument("--reason", metavar="TEXT", help="why it is cancelled (recorded in the log)")
    c.add_argument("--compensate", action="store_true",
                   help="run the compensations of its completed steps before it ends cancelled")
    w = _action(actions, "wake", "end a sleeping step's timer now, saying why",
                "End the open sleep of step S now: the run continues at once. Recorded in the log with who "
                "and why.")
    w.add_argument("--step", dest="timer_step", required=True, metavar="S", help="the sleeping step")
    w.add_argument("--reason", required=True, metavar="TEXT", help="why it is woken (recorded in the log)")
    t = _action(actions, "reschedule", "move a sleeping step's due instant",
                "Move the due instant of the open sleep of step S to --until (ISO 8601 with its offset, e.g. "
                "2026-07-01T09:00:00-03:00; a past one fires at once). Recorded in the log with who and why.")
    t.add_argument("--step", dest="timer_step", required=True, metavar="S", help="the sleeping step")
    t.add_argument("--until", required=True, metavar="ISO", help="the new due instant, with its offset")
    t.add_argument("--reason", metavar="TEXT", help="why (recorded in the log)")
    _action(actions, "explain", "what holds the run back: each limit's key and use, since when, its oldest "
            "holder, the position, a throttle's next token, a pause", "What holds the run back (docs/flow.md "
            "\"Why queued\"): each limit of the run with its key, use (input.tenant=acme 5/5), since when, the "
            "oldest holder, the queue position, a throttle's next token, and any pause and its reason.", by=None)
    e = actions.add_parser("export", help="finished runs of a workflow as JSON lines, redacted (test fixtures)",
                           description="A random sample of the finished runs of a workflow, one history (the run "
                                       "and its attempts) per line, values under sensitive keys redacted: real "
                                       "runs to keep as test fixtures (docs/testkit.md).")
    e.add_argument("--workflow", dest="export_workflow", required=True, metavar="WF", help="workflow id or name")
    e.add_argument("--since", dest="export_since", default="14d", metavar="AGE",
                   help="created within this age (default 14d)")
    e.add_argument("--sample", type=_non_negative, default=500, metavar="N", help="at most N runs (default 500)")
    add_common_options(e, inherited=True)
    add_target_options(e, inherited=True)
    add_migrate(actions)
    p.__class__ = RunsParser
    return p


def _action(actions, name: str, help: str, description: str, *,
            by: str | None = "who decided (default: $USER)") -> argparse.ArgumentParser:
    """An action on one run: RUN, its own options added by the caller, then --by (unless `by` is None) and the
    options every verb has."""
    a = actions.add_parser(name, help=help, description=description)
    a.add_argument("run_id", metavar="RUN")
    if by is not None:
        a.add_argument("--by", metavar="NAME", help=by)
    add_common_options(a, inherited=True)
    add_target_options(a, inherited=True)
    return a


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def run(args: argparse.Namespace) -> int:
    if getattr(args, "runs_action", None) == "resolve":
        return run_api(_resolve, args)
    if getattr(args, "runs_action", None) == "skip":
        return run_api(_skip, args)
    if getattr(args, "runs_action", None) == "cancel":
        return run_api(_cancel, args)
    if getattr(args, "runs_action", None) == "export":
        return run_api(_export, args)
    if getattr(args, "runs_action", None) == "migrate":
        return run_api(migrate, args)
    if getattr(args, "runs_action", None) == "tree":
        return run_api(_tree, args)
    if getattr(args, "runs_action", None) == "explain":
        from .run_explain import explain

        return run_api(explain, args)
    if getattr(args, "runs_action", None) == "show":
        return run_api(_show, args)
    if getattr(args, "runs_action", None) in ("wake", "reschedule"):
        return run_api(_timer, args)
    return run_api(_list, args)


async def _list(auto, args) -> int:
    page = await auto.runs(state=args.state, workflow=args.workflow, step=args.step, since=args.since,
                           limit=args.limit)
    if args.format == "json":
        write(json_document(page.to_dict()))
    else:
        write(render_text(page))
    if any(r["state"] == "pending" for r in page.runs):
        await warn_without_daemon(auto)
    return EXIT_OK


def _step(r: dict) -> str | None:
    """The run's step, and for a run a wait step holds what it waits on: `approval (signal approved)`."""
    step = r["failed_step"] or r["current_step"]
    return f"{step} ({r['waiting_on']})" if r.get("waiting_on") else step


def render_text(page) -> str:
    out = f"total: {page.total}\n"
    if not page.runs:
        return out
    rows = [(r["run_id"], r["workflow_id"], r["version"], r["state"], _step(r),
             r["error_code"], rows_text(r.get("rows")), when(r["created_at"]), ms(r["duration_ms"]))
            for r in page.runs]
    out += table(("run", "workflow", "ver", "state", "step", "error", "rows in/out/err", "created", "duration"),
                 rows)
    if page.total > len(page.runs):
        out += f"({len(page.runs)} of {page.total} shown; --limit N for more)\n"
    return out


async def _tree(auto, args) -> int:
    doc = await auto.run_tree(args.run_id)
    if args.format == "json":
        write(json_document(doc))
        return EXIT_OK
    for r in doc["runs"]:
        how = "" if r["parent_run_id"] is None else f"{r['step_id']}" + (
            " (compensation)" if r["kind"] == "compensation" else "") + ": "
        mark = "  <-" if r["run_id"] == args.run_id and r["parent_run_id"] is not None else ""
        write(f"{'  ' * r['depth']}{how}{r['run_id']} {r['workflow_id']} v{r['version']} {r['state']}"
              + (f" {r['error_code']}" if r["error_code"] else "") + f"{mark}\n")
    if doc["truncated"]:
        write(f"(the first {len(doc['runs'])} runs of the tree)\n")
    return EXIT_OK


async def _resolve(auto, args) -> int:
    by = decided_by(args.by)
    result = await auto.resolve(args.run_id, args.resolve_step, args.outcome, by=by)
    if args.format == "json":
        write(json_document(result))
    else:
        write(f"{args.run_id} step {args.resolve_step} resolved as {args.outcome}; run is {result['state']}\n")
    return EXIT_OK


async def _skip(auto, args) -> int:
    by = decided_by(args.by)
    result = await auto.skip(args.run_id, partition=args.skip_partition, step=args.skip_step, reason=args.reason,
                             by=by)
    if args.format == "json":
        write(json_document(result))
    else:
        what = f"partition {result['partition']} of step {result['step_id']}" if result["partition"] is not None \
            else f"step {result['step_id']}"
        write(f"{args.run_id} {what} skipped by {by}; run is {result['state']}\n")
    return EXIT_OK


async def _cancel(auto, args) -> int:
    by = decided_by(args.by)
    result = await auto.cancel(args.run_id, by=by, reason=args.reason, compensate=args.compensate)
    if args.format == "json":
        write(json_document(result))
    elif result["outcome"] == "already_cancelled":
        write(f"{args.run_id} was already cancelled\n")
    elif result["outcome"] == "cancelled":
        write(f"{args.run_id} cancelled (it was {result['previous_state']})\n")
    else:
        then = "compensates its completed steps, then ends cancelled" if result["compensate"] else \
            "stops at its next safe point"
        write(f"{args.run_id} cancel requested: the run ({result['state']}) {then}\n")
    return EXIT_OK


async def _export(auto, args) -> int:
    """JSON lines, one history a line (the verb's text form: `> histories.jsonl`); `--format json`: one document
    {"histories": [...]}, as GET /v1/automation/histories answers."""
    from ..durations import parse_duration
    from .output import json_line

    histories = await auto.export(args.export_workflow, since=parse_duration(args.export_since), sample=args.sample)
    if args.format == "json":
        write(json_document({"histories": histories}))
        return EXIT_OK
    for history in histories:
        write(json_line(history))
    return EXIT_OK


async def _timer(auto, args) -> int:
    by = decided_by(args.by)
    if args.runs_action == "wake":
        result = await auto.wake(args.run_id, args.timer_step, by=by, reason=args.reason)
    else:
        result = await auto.reschedule(args.run_id, args.timer_step, until=args.until, by=by, reason=args.reason)
    if args.format == "json":
        write(json_document(result))
    else:
        done = "woken" if args.runs_action == "wake" else "rescheduled"
        write(f"{args.run_id} step {args.timer_step} {done} by {by}: due {when(result['due_at'])}\n")
    return EXIT_OK


def carried_text(run: dict) -> str:
    """The debounced / batched events a run carries (docs/flow.md "Debounce and batch"), one line each."""
    c = run.get("carried")
    if not c:
        return ""
    out = (f"carries {c['count']} events of {c['kind']} buffer {c['buffer_id']} (key {c['key'] or '-'}, "
           f"flushed {when(c['flushed_at'])} on {c['reason']}):\n")
    out += "".join(f"  {e['event_id']}  {when(e['occurred_at'])}  {e['type']}  {e['idempotency_key']}\n"
                   for e in c["events"])
    more = c["count"] - len(c["events"])
    return out + (f"  ... {more} more\n" if more > 0 else "")


async def _show(auto, args) -> int:
    from .cmd_logs import timers_text

    run = await auto.get_run(args.run_id)
    if args.format == "json":
        write(json_document(run))
        return EXIT_OK
    out = f"{run['run_id']}  {run['workflow_id']} v{run['version']}  {run['state']}\n"
    step = run.get("failed_step") or run.get("current_step")
    out += f"step: {step or '-'}  error: {run.get('error_code') or '-'}  created: {when(run['created_at'])}\n"
    write(out + blocked_text(run) + timers_text(run) + approvals_text(run) + carried_text(run))
    return EXIT_OK


def blocked_text(run: dict) -> str:
    """A `blocked_version` run (docs/verify.md): where code and history part, and the commands that settle it."""
    if run.get("state") != "blocked_version":
        return ""
    return (f"blocked: {run.get('error_message') or '-'}\n"
            f"next: a44 automation runs migrate --workflow {run['workflow_id']} --to N --from {run['version']} "
            f"(N: a version whose code replays it; verify FILE first), or a44 automation runs cancel {run['run_id']}\n")


def approvals_text(run: dict) -> str:
    """`waiting on approval of STEP 1/2 by alice, bob until ...`, one line per open approval (docs/approvals.md),
    and its decisions so far."""
    from ..app.approvals import waiting_text

    out = ""
    for a in run.get("approvals") or ():
        if a["state"] == "open":
            out += f"waiting on {waiting_text(a)} until {when(a['timeout_at'])}\n"
        out += "".join(f"  {d['person']} {d['decision']} via {d['via']} at {d['at']}"
                       + (f": {d['comment']}" if d.get("comment") else "") + "\n" for d in a["decisions"])
    return out
