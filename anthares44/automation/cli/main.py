"""Entry point of the `a44` command: parses `a44 automation VERB ...` (and the groups beside it: `a44 auth`,
`a44 monitor`) and dispatches to one verb module.

Each verb lives in `cli/cmd_<verb>.py` exposing `add_parser(subparsers)` and `run(args) -> int`. Verb modules
import nothing heavy at module level (asyncpg, aiohttp, pydantic models...): `a44 automation lint` must start
fast, so heavy imports happen inside `run`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .output import ArgParser, exit_code, print_error, usage_error

# verb -> module under anthares44.automation.cli; order is the order shown in --help.
VERBS: dict[str, str] = {
    "lint": "cmd_lint",
    "compile": "cmd_compile",
    "schema": "cmd_schema",
    "expr": "cmd_expr",
    "schedule": "cmd_schedule",
    "db": "cmd_db",
    "publish": "cmd_publish",
    "versions": "cmd_versions",
    "run": "cmd_run",
    "runs": "cmd_runs",
    "signal": "cmd_signal",
    "approve": "cmd_approve",
    "approvals": "cmd_approvals",
    "logs": "cmd_logs",
    "serve": "cmd_serve",
    "webhook": "cmd_webhook",
    "events": "cmd_events",
    "ingest": "cmd_ingest",
    "connectors": "cmd_connectors",
    "secrets": "cmd_secrets",
    "replay": "cmd_replay",
    "queues": "cmd_queues",
    "dlq": "cmd_dlq",
    "flow": "cmd_flow",
    "metrics": "cmd_metrics",
    "partitions": "cmd_partitions",
    "console": "cmd_console",
    "test": "cmd_test",
    "verify": "cmd_verify",
}


def build_parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="a44", description="a44: durable workflow automation")
    parser.add_argument("--version", action="version", version=f"a44 {version()}")
    top = parser.add_subparsers(dest="group", metavar="GROUP", parser_class=ArgParser)
    top.required = True
    auto = top.add_parser("automation", help="compile, lint, publish and run workflows")
    verbs = auto.add_subparsers(dest="verb", metavar="VERB", parser_class=ArgParser)
    verbs.required = True
    for modname in VERBS.values():
        mod = importlib.import_module(f"anthares44.automation.cli.{modname}")
        sub = mod.add_parser(verbs)
        sub.set_defaults(_run=mod.run)
    # groups beside `automation`: API tokens and credentials; alerts, channels, notifications; shell completion
    from . import cmd_auth, cmd_completion, cmd_monitor
    cmd_auth.add_group(top)
    cmd_monitor.add_group(top)
    cmd_completion.add_group(top)
    parser.set_defaults(_parser=parser)    # for verbs about the command line itself (completion)
    return parser


def version() -> str:
    """The installed distribution's version (importlib.metadata: no import of the package's heavy parts)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("anthares44-automation")
    except PackageNotFoundError:   # run from a source tree that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ..errors import A44Error
    from ..settings import Settings

    try:
        args.settings = Settings.from_env()    # the one read of the environment (docs/settings.md)
    except ValueError as exc:
        return usage_error(str(exc), "see docs/settings.md for every A44_* variable")

    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("a44: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except A44Error as exc:  # a verb that let a coded error through still prints it the one way
        print_error(exc)
        return exit_code(exc)
    except Exception as exc:  # noqa: BLE001 - a bug of ours: say so plainly; the traceback only on request
        import traceback

        if args.settings.debug:
            traceback.print_exc()
        print(f"a44: internal error: {type(exc).__name__}: {exc}\n  hint: this is a bug in a44, not in your "
              f"input; rerun with A44_DEBUG=1 for the traceback and report it", file=sys.stderr)
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
