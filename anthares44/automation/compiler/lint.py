"""The compile pipeline over paths: files -> sources -> declarations -> project -> rules -> diagnostics (+ IR).

`lint_paths` is what `a44 automation lint` and `publish` call; it never raises for a user's mistake.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Diagnostic, Span, register, sorted_diagnostics
from ..suggestions import bounded
from .documents import declarations
from .project import Known, Project
from .source import SourceFile, load_file

A44901 = register("A44901", "path cannot be read")
A44902 = register("A44902", "no workflow files found")

YAML_SUFFIXES = (".yaml", ".yml")
TEST_FILE_SUFFIX = ".a44test.yaml"    # the test kit's declarative tests (docs/testkit.md): not workflow files
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".a44", ".tox", ".mypy_cache",
              ".pytest_cache", ".hypothesis", "build", "dist"}


@dataclass
class LintResult:
    diagnostics: list[Diagnostic]
    files: list[str]
    project: Project | None = None
    irs: dict[str, Any] = field(default_factory=dict)   # workflow id -> IR (only for workflows without errors)


def discover(paths: list[str]) -> tuple[list[str], list[Diagnostic]]:
    """YAML files under `paths` (directories recursed, hidden and tool directories skipped), sorted."""
    files: list[str] = []
    diags: list[Diagnostic] = []
    for p in paths:
        if os.path.isdir(p):
            before = len(files)
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for n in sorted(names):
                    if n.endswith(YAML_SUFFIXES) and not n.startswith(".") and n != ".pre-commit-hooks.yaml" \
                            and not n.endswith(TEST_FILE_SUFFIX):
                        files.append(os.path.normpath(os.path.join(root, n)))
            if len(files) == before:
                diags.append(Diagnostic.at(A44902, "no workflow files found: this directory holds no *.yaml or "
                                                   "*.yml file", os.path.normpath(p), Span(1, 1, 1, 1),
                                           hint="pass the directory that holds the workflow files"))
        elif os.path.isfile(p):
            files.append(os.path.normpath(p))
        else:
            diags.append(Diagnostic.at(A44901, "no such file or directory", os.path.normpath(p),
                                       Span(1, 1, 1, 1)))
    return list(dict.fromkeys(files)), diags   # each file once, in the order found


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Compiling builds hundreds of thousands of objects that stay alive until the result is returned, and
    hardly any garbage cycle: the cyclic collector would rescan the growing heap for nothing (half the time of
    a 14,000-step workflow, and super-linear). It is switched back on (if it was on) when compiling ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def compile_sources(sources: list[SourceFile], mode: str = "lint", *, lower: bool = True,
                    known: Known | None = None) -> LintResult:
    with _collector_paused(), bounded():
        return _compile(sources, mode, lower, known or Known())


def _compile(sources: list[SourceFile], mode: str, lower: bool, known: Known) -> LintResult:
    decls = []
    for src in sources:
        if src.parsed:
            decls.extend(declarations(src))
    project = Project(sources, decls, mode, known)
    from .rules import run_rules

    diags = [d for s in sources for d in s.diagnostics]
    diags.extend(run_rules(project))
    result = LintResult(sorted_diagnostics(diags), [s.path for s in sources], project)
    if lower:
        from .lower import lower_project

        result.irs = lower_project(project, result.diagnostics)
    return result


def lint_paths(paths: list[str], *, strict: bool = False, mode: str = "lint", lower: bool = False,
               known: Known | None = None, context: list[str] | None = None) -> LintResult:
    """Lint files and directories; `strict` only matters to the caller's exit code (warnings fail).

    `context`: more files and directories of the project (a44.toml `paths`), compiled with them so that
    references to what they declare settle, but not reported on."""
    files, diags = discover(paths or ["."])
    extra = [f for f in discover(list(context))[0] if f not in set(files)] if context else []
    with _collector_paused():
        sources = [load_file(f) for f in files + extra]
        result = compile_sources(sources, mode, lower=lower, known=known)
    if extra:
        linted = set(files)
        result.diagnostics = [d for d in result.diagnostics if d.file in linted]
        result.files = files
    result.diagnostics = sorted_diagnostics(result.diagnostics + diags)
    return result
