"""`a44 automation publish FILE...`: compile in publish mode and store each workflow's IR under its version.

Prints every diagnostic in the lint text format, then one line per workflow (`wf_x v3 created|unchanged|refused`,
a refusal followed by the store's reason and hint). Exit 0 when nothing was refused, 1 when the compiler found an
error (nothing is stored) or the store refused a workflow, 2 on usage errors. Applies pending database
migrations first, so publishing to a fresh embedded database just works.

`a44 automation publish FILE --plan [--format text|json|github]` stores nothing: for each workflow it classifies
every open run of every older version as compatible, mappable (by the file's `migrate:` block) or blocked, with
the reasons and the first differing step (docs/deploys.md). Exit 0, 3 when a run is blocked (a CI gate), 1 on a
compile error. A workflow with `versioning: auto-upgrade` moves its compatible open runs when it is published.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_ERROR, EXIT_OK, EXIT_PLAN_BLOCKED, EXIT_USAGE
from .output import FORMATS, add_common_options, add_target_options, json_document, run_api, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("publish", help="compile workflow files and store them as their version",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="FILE", help="workflow files or directories (recursed for *.yaml)")
    p.add_argument("--plan", action="store_true",
                   help="store nothing: classify the open runs of older versions (exit 3 when one is blocked)")
    add_common_options(p)
    for action in p._actions:       # --plan also prints GitHub workflow commands
        if action.dest == "format":
            action.choices, action.help = (*FORMATS, "github"), "output format (default: text; github: with --plan)"
    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    if args.plan:
        return run_api(_plan, args, migrate=True)
    if args.format == "github":
        print("a44 automation publish: --format github goes with --plan", file=sys.stderr)
        return EXIT_USAGE
    return run_api(_publish, args, migrate=True)


async def _plan(auto, args) -> int:
    from .plan_output import render_github
    from .plan_output import render_text as plan_text

    report = await auto.publish_plan(args.paths)
    doc = report.to_dict()
    if args.format == "json":
        write(json_document(doc))
    elif report.errors:
        write(render_diagnostics(report.diagnostics, report.files))
        print(summary_line(report), file=sys.stderr)
    else:
        write(render_github(doc) if args.format == "github" else plan_text(doc))
    if report.errors:
        return EXIT_ERROR
    return EXIT_PLAN_BLOCKED if doc["counts"]["blocked"] else EXIT_OK


async def _publish(auto, args) -> int:
    report = await auto.publish(args.paths)
    if args.format == "json":
        write(json_document(report.to_dict()))
    else:
        write(render_text(report, color_stream=sys.stdout))
        print(summary_line(report), file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_ERROR


def render_diagnostics(diagnostics, files, *, color_stream=None) -> str:
    """The diagnostics in the lint text format."""
    import os

    from .reporters import ReportSettings, create
    from .reporters.terminal import TerminalPolicy

    policy = TerminalPolicy.for_stream("auto", color_stream or sys.stdout, env=os.environ)
    return create("text", ReportSettings(color=policy.color, snippets=policy.snippets)).render(diagnostics, files)


def render_text(report, *, color_stream=None) -> str:
    out = render_diagnostics(report.diagnostics, report.files, color_stream=color_stream)
    for wf in report.workflows:
        out += f"{wf.workflow_id} v{wf.version} {wf.outcome}\n"
        if wf.error is not None:
            out += f"  {wf.error.code} {wf.error.message}\n"
            if wf.error.hint:
                out += f"  hint: {wf.error.hint}\n"
    for queue_id, outcome in report.queues:
        out += f"{queue_id} (queue) {outcome}\n"
    for connector_id, outcome in report.connectors:
        out += f"{connector_id} (connector) {outcome}\n"
    for trigger in report.stored_triggers:
        out += f"{trigger.trigger_id} ({trigger.type} trigger, {trigger.origin}) {trigger.outcome}\n"
        if trigger.secret_created:
            out += (f"  webhook secret created: `a44 automation webhook secret {trigger.trigger_id}` shows it once\n")
    for name, outcome in report.channels:
        out += f"{name} (notification channel) {outcome}\n"
    for name, outcome in report.alerts:
        out += f"{name} (alert rule) {outcome}\n"
    for u in getattr(report, "upgraded", ()):
        moved = ", ".join(f"{n} {k}" for k, n in sorted(u["counts"].items())) or "no open run"
        out += f"{u['workflow_id']} auto-upgrade to v{u['to']}: {moved}\n"
    return out


def summary_line(report) -> str:
    if report.errors:
        return (f"publish refused: {report.errors} error{'s' if report.errors != 1 else ''} in "
                f"{len(report.files)} file{'s' if len(report.files) != 1 else ''}; nothing was stored")
    counts = {o: sum(1 for w in report.workflows if w.outcome == o) for o in ("created", "unchanged", "refused")}
    line = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    if report.queues:
        line += ("; " if line else "") + f"{len(report.queues)} queue{'s' if len(report.queues) != 1 else ''}"
    if report.connectors:
        n = len(report.connectors)
        line += ("; " if line else "") + f"{n} connector{'s' if n != 1 else ''}"
    line = line or "no workflow found"
    return f"{line} in project {report.project}"
