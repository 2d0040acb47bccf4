"""The `a44 automation lint [PATHS...]` verb: options -> settings -> linter -> findings -> reporter -> exit code.

Linting itself belongs to the compiler (`compiler.lint.lint_paths`, imported only when the verb runs, so that
`a44 --help` and the other verbs stay fast), and for `.py` code workflows to the SDK (`sdk.lint.lint_code`).
This module only wires the pieces: it turns argv into `LintSettings`, reads the project's config
(`compiler.project_config`: the files references settle against), asks the linters for the findings, hands them to the reporter named by `--format`, writes the
report to stdout and the one-line summary (`N errors, M warnings in K files`) to stderr, and maps the outcome
to the exit code: 0 clean (warnings alone are clean unless `--strict`), 1 findings, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from ..errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from .reporters import FORMATS  # light: the registry imports no reporter module until one is created
from .reporters.terminal import COLOR_MODES


@dataclass(frozen=True)
class LintSettings:
    paths: tuple[str, ...]             # empty: the project's paths (a44.toml), else "."
    format: str = "text"
    strict: bool = False
    color: str = "auto"
    project_dir: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LintSettings:
        color = "never" if args.no_color else args.color
        return cls(tuple(args.paths or ()), args.format, bool(args.strict), color,
                   getattr(args, "project_dir", None))


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "lint", help="check workflow, trigger, connector and queue files",
        description="Compile every YAML file under PATHS and report all problems (file:line:col). "
                    "Exit 0 clean, 1 findings, 2 usage error.")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (recursed for *.yaml, *.yml, and .py code workflows named "
                             "as files); default: the project's paths, else .")
    parser.add_argument("--project-dir", metavar="DIR",
                        help="the project: references settle against the files listed by `paths` in its "
                             "a44.toml or pyproject.toml [tool.a44] (else all of DIR); default: the current "
                             "directory when it has such a file")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text",
                        help="output format (default: text)")
    parser.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
    parser.add_argument("--color", choices=COLOR_MODES, default="auto",
                        help="color and caret snippets: auto (terminal, honours NO_COLOR), always, never")
    parser.add_argument("--no-color", action="store_true", help="same as --color never")
    return parser


def exit_code(diagnostics: Sequence, strict: bool) -> int:
    from anthares44.automation.diagnostics import has_errors
    return EXIT_FINDINGS if has_errors(diagnostics, strict=strict) else EXIT_OK


def report(settings: LintSettings, diagnostics: Sequence, files: Sequence[str], *,
           stdout: TextIO, stderr: TextIO, stdout_tty: bool | None = None,
           stderr_tty: bool | None = None, env: Mapping[str, str] | None = None,
           source_lines: Callable[[str], list[str] | None] | None = None) -> int:
    """Render findings with the chosen reporter, print the summary, return the exit code.

    `stdout_tty` / `stderr_tty` override terminal detection and `source_lines` the file reader used for
    snippets (tests use them instead of a real TTY and real files).
    """
    from anthares44.automation.cli import reporters
    from anthares44.automation.cli.reporters.terminal import BOLD, TerminalPolicy, is_tty, paint

    out_policy = TerminalPolicy.decide(
        settings.color, tty=is_tty(stdout) if stdout_tty is None else stdout_tty, env=env)
    err_policy = TerminalPolicy.decide(
        settings.color, tty=is_tty(stderr) if stderr_tty is None else stderr_tty, env=env)
    text_like = settings.format == "text"
    extra = {"source_lines": source_lines} if source_lines else {}
    rep = reporters.create(settings.format, reporters.ReportSettings(
        color=out_policy.color and text_like, snippets=out_policy.snippets and text_like, **extra))
    stdout.write(rep.render(diagnostics, files))
    stdout.flush()
    summary = reporters.Summary.of(diagnostics, files)
    stderr.write(paint(summary.line(), BOLD, enabled=err_policy.color) + "\n")
    return exit_code(diagnostics, settings.strict)


def run(args: argparse.Namespace) -> int:
    settings = LintSettings.from_args(args)
    try:
        from anthares44.automation.compiler.lint import lint_paths
    except ImportError as exc:  # the compiler is part of this package; missing means a broken install
        print(f"a44: lint: the compiler is unavailable ({exc})", file=sys.stderr)
        return EXIT_USAGE
    from anthares44.automation.compiler.project_config import load_config
    from anthares44.automation.diagnostics import sorted_diagnostics

    config = load_config(settings.project_dir or ".", explicit=settings.project_dir is not None)
    paths = list(settings.paths) or config.paths or ["."]
    code = [p for p in paths if p.endswith(".py") and os.path.isfile(p)]   # code workflows, named as files
    paths = [p for p in paths if p not in code]
    known = None
    if config.paths:
        from anthares44.automation.compiler.project import Known

        known = Known(f"of the project ({config.file or settings.project_dir})")
    diagnostics, files = list(config.diagnostics), []
    if paths or not code:
        result = lint_paths(paths, strict=settings.strict, context=config.paths, known=known)
        diagnostics += result.diagnostics
        files += result.files
    if code:
        from anthares44.automation.sdk.lint import lint_code

        diagnostics += lint_code(code)
        files += [os.path.normpath(p) for p in code]
    return report(settings, sorted_diagnostics(diagnostics), files, stdout=sys.stdout, stderr=sys.stderr,
                  env=os.environ)
