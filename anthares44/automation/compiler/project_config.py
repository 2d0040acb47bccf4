"""Where a project's files are, for `lint` (offline, no database) to settle references across them: the
`paths` of `a44.toml`, or of `[tool.a44]` in `pyproject.toml`, in the project directory, relative to it.

    # a44.toml
    paths = ["workflows/", "queues/", "connectors/"]

Without a config file, `--project-dir DIR` makes the whole of DIR the project. A config that cannot be used
is a diagnostic (A44903) at its own file and line, like any other finding.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field

from ..diagnostics import Diagnostic, Span, register
from .validation import did_you_mean

A44903 = register("A44903", "project configuration cannot be used")

CONFIG_FILES = ("a44.toml", "pyproject.toml")
KEYS = ("paths",)
_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


@dataclass
class ProjectConfig:
    paths: list[str] = field(default_factory=list)    # the project's files and directories (empty: none known)
    file: str | None = None                           # the config file read, if any
    diagnostics: list[Diagnostic] = field(default_factory=list)


def load_config(project_dir: str = ".", *, explicit: bool = False) -> ProjectConfig:
    """The project of `project_dir`; `explicit` (it was named by --project-dir): without a config file the
    whole directory is the project."""
    for name in CONFIG_FILES:
        path = os.path.normpath(os.path.join(project_dir, name))
        if not os.path.isfile(path):
            continue
        config = _read(path, project_dir, table=name == "pyproject.toml")
        if config is not None:
            return config
    return ProjectConfig([os.path.normpath(project_dir)] if explicit else [])


def _read(path: str, project_dir: str, *, table: bool) -> ProjectConfig | None:
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        return _bad(path, 1, 1, f"cannot read the project configuration: {exc}")
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_AT.search(str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
        return _bad(path, line, col, f"invalid TOML: {_TOML_AT.sub('', str(exc)).strip()}")
    if table:
        ours = data.get("tool", {}).get("a44") if isinstance(data.get("tool"), dict) else None
        if ours is None:
            return None              # a pyproject.toml without [tool.a44] is not a44's
        data = ours
        if not isinstance(data, dict):
            return _bad(path, _line_of(text, "a44"), 1, "[tool.a44] must be a table")
    diags = []
    for key in data:
        if key not in KEYS:
            diags.append(_diag(path, _line_of(text, key), f"unknown key {key!r}; expected one of: "
                               f"{', '.join(KEYS)}", hint=did_you_mean(key, KEYS)))
    paths = data.get("paths")
    if not (isinstance(paths, list) and paths and all(isinstance(p, str) and p for p in paths)):
        where = "[tool.a44] " if table else ""
        diags.append(_diag(path, _line_of(text, "paths"), f"{where}`paths` must be a non-empty list of file or "
                           f"directory names", hint='e.g. paths = ["workflows/", "queues/"]'))
        return ProjectConfig([], path, diags)
    out = []
    for p in paths:
        full = os.path.normpath(os.path.join(project_dir, p))
        if not os.path.exists(full):
            diags.append(_diag(path, _line_of(text, "paths"), f"`paths` names {p!r}, which does not exist "
                               f"(relative to {os.path.normpath(project_dir)})"))
            continue
        out.append(full)
    return ProjectConfig(out, path, diags)


def _line_of(text: str, key: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*(\[tool\.)?{re.escape(key)}\b", line):
            return i
    return 1


def _diag(path: str, line: int, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic.at(A44903, message, path, Span(line, 1, line, 1), hint=hint)


def _bad(path: str, line: int, col: int, message: str) -> ProjectConfig:
    return ProjectConfig([], path, [Diagnostic.at(A44903, message, path, Span(line, col, line, col))])
