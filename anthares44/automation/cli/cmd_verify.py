"""`a44 automation verify FILE --histories export.jsonl` (or `--since 14d --sample 500`, from the database): the
replay gate of a deploy (SPEC §23, docs/verify.md). Every recorded history of FILE's workflows is replayed against
FILE with zero connector calls (code workflows) or compared with its new IR (YAML); the first divergent step of
each run is reported. Exit 0 none diverge, 1 some do, 2 bad input (an unreadable file, a line that is not a
history: E_BAD_INPUT naming file and line). `--format text|json|github` (github: one `::error` annotation per run).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_FINDINGS, EXIT_OK


def add_parser(subparsers):
    p = subparsers.add_parser(
        "verify", help="replay recorded histories against a new version (the deploy's replay gate)",
        description="Replay each recorded run of FILE's workflows against FILE with no connector call and report "
                    "the first divergent step per run. Exit 0 none diverge, 1 some do, 2 bad input.")
    p.add_argument("file", metavar="FILE", help="the new version: a .py code workflow module or a YAML workflow")
    p.add_argument("--histories", metavar="JSONL",
                   help="histories as `a44 automation runs export` writes them (JSON lines, or its --format json "
                        "document); without it, runs are read from the database (--since, --sample)")
    p.add_argument("--since", default="14d", metavar="AGE", help="with the database: runs created within AGE "
                                                                 "(default 14d)")
    p.add_argument("--sample", type=int, default=500, metavar="N",
                   help="with the database: at most N runs per workflow, a random sample (default 500)")
    p.add_argument("--format", "-f", choices=("text", "json", "github"), default="text",
                   help="text (default), json, or github (workflow-command annotations)")
    p.add_argument("--project", metavar="P", help="with the database: the project (default: $A44_PROJECT)")
    return p


def run(args: argparse.Namespace) -> int:
    import asyncio

    from ..app.verify import read_histories, verify
    from ..errors import A44Error
    from .output import exit_code, print_error, run_api

    if args.histories is None:
        return run_api(_from_store, args)
    try:
        report = asyncio.run(verify(args.file, read_histories(args.histories)))
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)
    return _print(report, args.format)


async def _from_store(auto, args) -> int:
    from ..app.automation import InvalidArgument
    from ..app.verify import histories_from_store, load_target, verify
    from ..durations import parse_duration

    if args.sample < 1:
        raise InvalidArgument("--sample must be at least 1")
    try:
        since = parse_duration(args.since)
    except ValueError as exc:
        raise InvalidArgument(f"--since {args.since!r}: {exc}") from None
    _, targets = load_target(args.file)
    histories = await histories_from_store(auto.store, auto.project, sorted(targets), since=since,
                                           sample=args.sample)
    return _print(await verify(args.file, histories), args.format)


def _print(report, fmt: str) -> int:
    from .output import json_document

    if fmt == "json":
        sys.stdout.write(json_document(report.to_dict()))
    elif fmt == "github":
        for f in report.findings:
            sys.stdout.write(f"::error file={_escape(report.file, True)},title=replay divergence at "
                             f"{_escape(f.step or '-', True)}::{_escape(_line(f), False)}\n")
        sys.stdout.write(f"::notice::{_summary(report)}\n")
    else:
        for f in report.findings:
            sys.stdout.write(_line(f) + "\n")
    print(_summary(report), file=sys.stderr)
    return EXIT_FINDINGS if report.findings else EXIT_OK


def _line(f) -> str:
    has = repr(f.history_has) if f.history_has else "the run's end"
    asked = repr(f.code_asked) if f.code_asked else "the workflow returning"
    line = f"{f.run_id} ({f.workflow} v{f.version}, {f.state}): step #{f.position}: the history has {has}, " \
           f"the code asked for {asked}"
    return line if f.history_has or f.code_asked else f"{line}: {f.message}"


def _summary(report) -> str:
    by: dict[str, int] = {}
    for f in report.findings:
        by[f.step or "-"] = by.get(f.step or "-", 0) + 1
    steps = ", ".join(f"{s} ({n})" for s, n in sorted(by.items()))
    skipped = f"; {report.skipped} of other workflows skipped" if report.skipped else ""
    return (f"{report.divergent} of {report.checked} histories diverge from {report.file}"
            + (f" at {steps}" if steps else "") + skipped)


def _escape(text: str, prop: bool) -> str:
    """GitHub workflow-command escaping (`%`, CR, LF; in properties also `:` and `,`)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text
