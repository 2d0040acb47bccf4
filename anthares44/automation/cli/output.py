"""Shared plumbing of the runtime verbs (publish, run, runs, logs): common options, running the async API,
printing errors as `E_CODE message` + `hint:`, aligned tables and JSON documents.

Exit codes of these verbs: 0 ok, 1 error or refusal (database unreachable, workflow refused, run ended badly),
2 usage (bad arguments, bad --input JSON, missing --idempotency-key, unknown state), 124 `run --wait --timeout`
elapsed before the run ended (as coreutils `timeout`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Sequence, TextIO

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 124


class ArgParser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message on stderr, prefixed like ours. Every parser and
    sub-parser of the CLI is one of these (cli/main.py and the verb groups beside `automation`)."""

    def error(self, message: str):  # noqa: D401
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"a44: error: {message}\n")
FORMATS = ("text", "json")


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", metavar="P", help="project id (default: $A44_PROJECT, else pj_default)")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text", help="output format (default: text)")


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """Where the verb goes: the database, or a daemon's REST API (docs/cli.md "Remote mode")."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--remote", action="store_true",
                       help="use a daemon's REST API: $A44_API_URL, else the stored `a44 auth login`")
    where.add_argument("--api-url", metavar="URL", help="use the REST API at URL (implies --remote)")
    where.add_argument("--local", action="store_true", help="use the database even when a remote is configured")
    parser.add_argument("--verbose", "-v", action="store_true", help="say which server or database is used")


def settings_of(args: argparse.Namespace):
    """The environment's settings, read once by `main` (settings.py); read here for a verb called directly."""
    settings = getattr(args, "settings", None)
    if settings is None:
        from ..settings import Settings

        settings = args.settings = Settings.from_env()
    return settings


def print_error(exc, stream: TextIO | None = None) -> None:
    """`E_CODE message`, then `hint: ...` when there is one: one grep-able line, never a traceback. The one way
    every verb prints an A44Error (docs/cli.md)."""
    stream = stream or sys.stderr
    print(f"{exc.code} {exc.message}", file=stream)
    if exc.hint:
        print(f"hint: {exc.hint}", file=stream)


def exit_code(exc) -> int:
    """The exit code of a verb that ends with this A44Error: errors.py's table (2 usage, else 1)."""
    from ..errors import exit_code as code_exit

    return code_exit(exc.code)


def usage_error(message: str, hint: str | None = None) -> int:
    print(f"a44: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    return EXIT_USAGE


def run_api(body: Callable[..., Awaitable[int]], args: argparse.Namespace, *, migrate: bool = False) -> int:
    """Connect an `Automation` for `args.project`, run `body(auto, args)`, close, and map errors to exit codes."""
    import asyncio

    from ..api import Automation
    from ..errors import A44Error

    async def main(target) -> int:
        if target is not None and target.remote:
            from ..app.remote import RemoteAutomation

            auto = RemoteAutomation(target.url, target.token, target.project,
                                    send_project=target.project_explicit)
        else:
            auto = await Automation.connect(project=args.project, migrate=migrate, settings=settings_of(args))
        try:
            return await body(auto, args)
        finally:
            if getattr(auto, "store", None) is not None:
                await _flush_counters(auto.store)
            await auto.close()

    try:
        target = None
        if hasattr(args, "remote"):  # the verbs that can go remote (publish, run, runs, logs, events)
            from ..app.credentials import select_target

            target = select_target(settings_of(args), args.project, remote=args.api_url or args.remote or None,
                                   local=args.local)
            if args.verbose:
                print(f"a44: target: {target.describe()}", file=sys.stderr)
        return asyncio.run(main(target))
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)


async def _flush_counters(store) -> None:
    """What this short process counted (events published, webhook rejections...) joins the persisted totals
    `/metrics` reads, as a daemon's flusher does every second; a verb's own answer matters more than a failed
    flush (the database is then away, and the verb has said so)."""
    from ..app.metrics import flush_counters
    from ..errors import A44Error

    try:
        await flush_counters(store)
    except A44Error:
        pass


# --- text ------------------------------------------------------------------------------------------------
def when(value: datetime | None) -> str:
    """`2026-07-19 14:02:11Z` (UTC, to the second) for tables; `-` when unset."""
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def ms(value: int | None) -> str:
    from ..durations import format_seconds

    return "-" if value is None else format_seconds(value / 1000)


def cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns left-aligned, two spaces apart, upper-case headers; the last column is not padded."""
    text_rows = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in text_rows]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    return "\n".join([line([h.upper() for h in headers])] + [line(r) for r in text_rows]) + "\n"


# --- json ------------------------------------------------------------------------------------------------
def json_document(doc: Any) -> str:
    """One indented JSON document (timestamps ISO 8601 UTC with `Z`, durations in ms)."""
    from ..jsonenc import to_json

    return to_json(doc) + "\n"


def json_line(doc: Any) -> str:
    """One compact JSON object per line (for streams: `logs --follow --format json`)."""
    from ..jsonenc import to_json

    return to_json(doc, indent=None) + "\n"


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class ProgressBar:
    """`replaying  120/412 [=======             ]` on stderr, drawn only on a terminal. The stream is looked up
    when the bar is made, not at import: sys.stderr may have been replaced since (pytest capture, embedders)."""

    WIDTH = 30

    def __init__(self, verb: str, stream=None):
        self.verb = verb
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty()
        self._open = False

    def __call__(self, done: int, total: int | None) -> None:
        if not self.on:
            return
        if total:
            fill = int(self.WIDTH * min(done, total) / total)
            self.stream.write(f"\r{self.verb} {done:>{len(str(total))}}/{total} "
                              f"[{'=' * fill}{' ' * (self.WIDTH - fill)}]")
        else:
            self.stream.write(f"\r{self.verb} {done}")
        self._open = True
        if total and done >= total:
            self.end()
        self.stream.flush()

    def end(self) -> None:
        if self.on and self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
