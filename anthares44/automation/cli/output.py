"""Shared plumbing of the runtime verbs (publish, run, runs, logs): common options, running the async API,
printing errors as `E_CODE message` + `hint:`, aligned tables and JSON documents.

Exit codes of these verbs: 0 ok, 1 error or refusal (database unreachable, workflow refused, run ended badly),
2 usage (bad arguments, bad --input JSON, missing --idempotency-key, unknown state), 124 `run --wait --timeout`
elapsed before the run ended (as coreutils `timeout`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from ..errors import EXIT_OK, EXIT_USAGE


class ArgParser(argparse.ArgumentParser):
    """Every parser and sub-parser of the CLI (cli/main.py and the verb groups beside `automation`). A usage
    error prints the usage, then the one error format of every verb (`E_INVALID_ARGUMENT message` + `hint:`, a
    did-you-mean for a misspelt verb, choice or option) and exits 2."""

    _innermost: ArgParser | None = None    # the last (sub)parser that parsed: whose options a misspelling meant

    def parse_known_args(self, args=None, namespace=None):
        ArgParser._innermost = self
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # noqa: D401
        verbs = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if (verbs is not None and message.startswith("the following arguments are required:")
                and (verbs.metavar or verbs.dest) in message):
            self.print_help(sys.stdout)   # `a44`, `a44 automation`, `a44 auth token`: what can follow
            self.exit(EXIT_OK)
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, _usage_text(message, _usage_hint(self, message)))


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (?P<words>.*)")


def _usage_hint(parser: argparse.ArgumentParser, message: str) -> str | None:
    from ..suggestions import closest

    m = _INVALID_CHOICE.search(message)
    if m:
        choices = re.findall(r"'([^']*)'", m.group("choices"))
        near = closest(m.group("word"), choices, 0.6)
        return f"did you mean {near!r}?" if near else None
    m = _UNRECOGNIZED.search(message)
    if m:
        verb = ArgParser._innermost or parser     # argparse reports them from the top parser, not the verb's
        options = [o for a in verb._actions for o in a.option_strings if o.startswith("--")]
        for word in m.group("words").split():
            if word.startswith("--"):
                near = closest(word.split("=", 1)[0], options, 0.6)
                if near:
                    return f"did you mean {near!r}?"
    return None


def _usage_text(message: str, hint: str | None) -> str:
    from ..errors import E_INVALID_ARGUMENT

    return f"{E_INVALID_ARGUMENT} {message}\n" + (f"hint: {hint}\n" if hint else "")


FORMATS = ("text", "json")


def _inherit(inherited: bool, default):
    """A sub-verb's copy of its group's option leaves the group's value alone when it is not given: argparse
    copies every default of a sub-parser over what its parent parsed (`runs --format json cancel RUN`)."""
    return {"default": argparse.SUPPRESS if inherited else default}


def add_common_options(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """`--project`, `--format`; `inherited` for a sub-verb whose group parser has them too."""
    parser.add_argument("--project", metavar="P", help="project id (default: $A44_PROJECT, else pj_default)",
                        **_inherit(inherited, None))
    parser.add_argument("--format", "-f", choices=FORMATS, help="output format (default: text)",
                        **_inherit(inherited, "text"))


def add_target_options(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """Where the verb goes: the database, or a daemon's REST API (docs/cli.md "Remote mode"); `inherited` for a
    sub-verb whose group parser has them too, so they may come before or after the sub-verb."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--remote", action="store_true", **_inherit(inherited, False),
                       help="use a daemon's REST API: $A44_API_URL, else the stored `a44 auth login`")
    where.add_argument("--api-url", metavar="URL", help="use the REST API at URL (implies --remote)",
                       **_inherit(inherited, None))
    where.add_argument("--local", action="store_true", help="use the database even when a remote is configured",
                       **_inherit(inherited, False))
    parser.add_argument("--verbose", "-v", action="store_true", help="say which server or database is used",
                        **_inherit(inherited, False))


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
    """Print a command-line mistake the one way (`E_INVALID_ARGUMENT message` + `hint:`); returns exit code 2."""
    sys.stderr.write(_usage_text(message, hint))
    return EXIT_USAGE


def run_api(body: Callable[..., Awaitable[int]], args: argparse.Namespace, *, migrate: bool = False,
            local_only: str | None = None) -> int:
    """Connect an `Automation` for `args.project` (or a `RemoteAutomation` when the target is remote), run
    `body(auto, args)`, close, and map errors to exit codes. `local_only`: the name of a verb the REST API does
    not offer, refused with E_REMOTE_UNSUPPORTED when the target is remote rather than run on the local database."""
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
            if target.remote and local_only:
                raise remote_unsupported(local_only)
            if args.verbose or (target.implicit and (target.remote or sys.stderr.isatty())):
                # where a verb goes when nothing on its command line said: always when a stored login
                # redirects it, on a terminal when it is the local default
                print(f"a44: target: {target.describe()}", file=sys.stderr)
        return asyncio.run(main(target))
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)


def goes_remote(args: argparse.Namespace) -> bool:
    """Whether a verb that also runs without a database (connectors, auth token) is aimed at a remote daemon:
    the rule of run_api, checked before anything local starts. Raises the A44Error of a bad choice."""
    from ..app.credentials import select_target

    return select_target(settings_of(args), args.project, remote=args.api_url or args.remote or None,
                         local=args.local).remote


def remote_unsupported(verb: str):
    from ..errors import E_REMOTE_UNSUPPORTED, A44Error

    return A44Error(E_REMOTE_UNSUPPORTED, f"`{verb}` has no REST endpoint: it cannot run against a remote daemon",
                    hint="run it on the daemon's host with --local (or A44_DATABASE_URL), where the database is")


def service(auto, name: str, local: Callable[[], Any]):
    """The app service `local()` (Queues(auto), Alerts(auto)...), or its REST twin when `auto` is remote."""
    if getattr(auto, "remote", False):
        from ..app.remote_services import twin

        return twin(auto, name)
    return local()


def remote_admin(auto):
    """The daemon's tokens, webhook secrets, metrics, connectors and replay, for a remote `auto`."""
    from ..app.remote_services import twin

    return twin(auto, "admin")


async def warn_without_daemon(auto) -> None:
    """`a44: warning: no daemon is serving this database ...` on stderr when runs would wait for one. The REST API
    is served by a running process, so a remote target is not checked."""
    check = getattr(auto, "daemon_presence", None)
    if check is None:
        return
    line = (await check()).warning()
    if line:
        print(f"a44: warning: {line}", file=sys.stderr)
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
def when(value: datetime | str | None) -> str:
    """`2026-07-19 14:02:11Z` (UTC, to the second) for tables, from a datetime or an ISO 8601 text; `-` when unset."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def ms(value: int | None) -> str:
    from ..durations import format_seconds

    return "-" if value is None else format_seconds(value / 1000)


def rows_text(rows: dict | None) -> str:
    """`10/8/2` (rows in / out / in error, `-` for a count nothing reported); `-` when no step reported any."""
    if not rows or all(rows.get(k) is None for k in ("in", "out", "error")):
        return "-"
    return "/".join("-" if rows.get(k) is None else str(rows[k]) for k in ("in", "out", "error"))


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


def decided_by(given: str | None) -> str:
    """Who a decision from this CLI is recorded for: `--by`, else the login name (os user)."""
    if given:
        return given
    import getpass

    return getpass.getuser()
