"""Golden cases of the compiler: discovery, running one case through the real CLI, and the generated cases.

Layout (actionlint style), under `tests/compiler/golden/<code>/`:

* `<case>.yaml` + `<case>.out` - a single-file case, linted as `a44 automation lint <case>.yaml` with the
  current directory set to the case's directory, so the paths printed are bare file names (`<case>.py`: a
  code workflow module, the same way);
* `<case>/` (a directory of files) + `<case>.out` - a cross-file case, linted as `a44 automation lint .`
  inside that directory;
* `<case>.out` alone - a generated case: its input is built by the function of the same name in
  `GENERATORS` (too large to commit, or an input that cannot be committed: a missing path).

`<case>.out` is exactly what the command prints on stdout (text format, no color, no snippets: stdout is
not a terminal). A case is *passing* when its name contains `_ok` (its `.out` must be empty) and *failing*
otherwise; a failing case's name starts with the code it demonstrates (`A44201_missing_timeout`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
UPDATE_ENV = "A44_UPDATE_GOLDEN"
INPUT_SUFFIXES = (".yaml", ".py")     # a single-file case: a YAML file or a code workflow module

LINE_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning) (?P<code>A44\d{3}) ",
                     re.MULTILINE)


def codes_in(output: str) -> set[str]:
    return {m.group("code") for m in LINE_RE.finditer(output)}


# ---------------------------------------------------------------- generated cases
def _oversize(workdir: Path, stem: str) -> list[str]:
    """One byte over the limit: a valid workflow padded with a comment."""
    from anthares44.automation.compiler.source import MAX_FILE_BYTES

    head = b"name: too-large\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 1s\n# "
    body = head + b"x" * (MAX_FILE_BYTES + 1 - len(head) - 1) + b"\n"
    assert len(body) == MAX_FILE_BYTES + 1
    (workdir / f"{stem}.yaml").write_bytes(body)
    return [f"{stem}.yaml"]


def _at_limit(workdir: Path, stem: str) -> list[str]:
    """Exactly at the limit: still accepted."""
    from anthares44.automation.compiler.source import MAX_FILE_BYTES

    head = b"name: at-limit\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 1s\n# "
    body = head + b"x" * (MAX_FILE_BYTES - len(head) - 1) + b"\n"
    assert len(body) == MAX_FILE_BYTES
    (workdir / f"{stem}.yaml").write_bytes(body)
    return [f"{stem}.yaml"]


def _steps(count: int, workdir: Path, stem: str) -> list[str]:
    (workdir / f"{stem}.yaml").write_text("name: many-steps\nversion: 1\nsteps:\n" +
                                          "".join(f"  - {{id: s{i}, sleep: 1s}}\n" for i in range(count)))
    return [f"{stem}.yaml"]


def _too_many_steps(workdir: Path, stem: str) -> list[str]:
    """One step over the cap."""
    from anthares44.automation.compiler.documents import MAX_STEPS

    return _steps(MAX_STEPS + 1, workdir, stem)


def _steps_at_limit(workdir: Path, stem: str) -> list[str]:
    """Exactly at the cap: still compiled."""
    from anthares44.automation.compiler.documents import MAX_STEPS

    return _steps(MAX_STEPS, workdir, stem)


def _missing(workdir: Path, stem: str) -> list[str]:
    """A path that does not exist (nothing is written)."""
    return [f"{stem}.yaml"]


GENERATORS: dict[str, Callable[[Path, str], list[str]]] = {
    "A44007_too_large": _oversize,
    "A44007_ok_at_limit": _at_limit,
    "A44901_missing_path": _missing,
    "A44204_too_many_steps": _too_many_steps,
    "A44204_ok_at_limit": _steps_at_limit,
}

# What each generated case is, in words (for docs/diagnostics.md).
GENERATED_INPUT = {
    "A44007_too_large": "a workflow file padded with a comment to one byte over 1 MiB (1,048,577 bytes)",
    "A44007_ok_at_limit": "the same file exactly 1 MiB long",
    "A44901_missing_path": "a path that does not exist",
    "A44204_too_many_steps": "a workflow of 15,001 sleep steps `- {id: sN, sleep: 1s}`, one over the cap",
    "A44204_ok_at_limit": "the same workflow with 15,000 steps",
}


# ---------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    out: Path

    @property
    def name(self) -> str:            # e.g. "A44201_missing_timeout"
        return self.out.stem

    @property
    def id(self) -> str:              # e.g. "A44201/A44201_missing_timeout"
        return f"{self.out.parent.name}/{self.name}"

    @property
    def yaml(self) -> Path | None:
        for suffix in INPUT_SUFFIXES:
            p = self.out.with_suffix(suffix)
            if p.is_file():
                return p
        return None

    @property
    def dir(self) -> Path | None:
        p = self.out.with_suffix("")
        return p if p.is_dir() else None

    @property
    def generator(self) -> Callable[[Path, str], list[str]] | None:
        return GENERATORS.get(self.name)

    @property
    def kind(self) -> str:
        if self.yaml is not None:
            return "file"
        if self.dir is not None:
            return "dir"
        if self.generator is not None:
            return "generated"
        return "orphan"

    @property
    def code(self) -> str | None:
        m = re.match(r"^(A44\d{3})_", self.name)
        return m.group(1) if m else None

    @property
    def passing(self) -> bool:
        return "_ok" in self.name

    def expected(self) -> str:
        return self.out.read_text(encoding="utf-8") if self.out.exists() else ""


def all_cases() -> list[Case]:
    """Every case: each `.out`, plus inputs (files, directories) that have no `.out` yet."""
    outs: set[Path] = set(GOLDEN.glob("*/*.out"))
    for p in GOLDEN.glob("*/*"):
        if p.suffix in INPUT_SUFFIXES or (p.is_dir()):
            outs.add(p.with_suffix(".out") if p.suffix in INPUT_SUFFIXES else p.with_name(p.name + ".out"))
    for d in {p.parent for p in GOLDEN.glob("*/*")}:
        for name in GENERATORS:
            if name.split("_", 1)[0] == d.name:
                outs.add(d / f"{name}.out")
    return sorted((Case(p) for p in outs), key=lambda c: c.id)


@contextlib.contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_lint(cwd: Path, args: list[str]) -> tuple[str, str, int]:
    """`a44 automation lint ARGS` in-process with cwd; returns (stdout, stderr, exit code)."""
    from anthares44.automation.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with _cwd(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["automation", "lint", *args])
    return out.getvalue(), err.getvalue(), code


def lint_argv(case: Case, workdir: Path | None = None) -> tuple[Path, list[str]]:
    """(cwd, lint arguments) of a case; generated cases write their input into `workdir`."""
    if case.kind == "file":
        return case.yaml.parent, [case.yaml.name]
    if case.kind == "dir":
        return case.dir, ["."]
    if case.kind == "generated":
        assert workdir is not None
        return workdir, case.generator(workdir, case.name)
    raise ValueError(f"golden case {case.id} has no input (no .yaml, no directory, no generator)")


def run_case(case: Case) -> tuple[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd, args = lint_argv(case, Path(tmp))
        out, _err, code = run_lint(cwd, args)
    return out, code
