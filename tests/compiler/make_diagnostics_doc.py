"""Generate docs/diagnostics.md from the golden cases, and read its examples back.

    .venv/bin/python tests/compiler/make_diagnostics_doc.py          # rewrite docs/diagnostics.md
    A44_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -n 0 tests/compiler  # rewrite the .out files and the doc

Every registered code gets a section `## A44xxx title` with its severity, one failing example taken from its
golden cases (`tests/compiler/golden/A44xxx/`) and the exact output of `a44 automation lint` on it, and, when
the code has a single-file passing case, a version that passes. Machine-readable HTML comments mark each
example's files and the lint command, so `test_codes.py` can run every example again and compare.
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from golden_support import GENERATED_INPUT, GENERATORS, Case, all_cases, run_lint  # noqa: E402

DOC = HERE.parent.parent / "docs" / "diagnostics.md"

# Codes with no golden case, and why (test_codes.py holds the same table and checks it).
NO_EXAMPLE = {
    "A44100": "the fallback for pydantic error types that have no code of their own; every error type the models "
              "can produce today has a specific code, so no file reaches it.",
    "A44213": "needs a connector plugin that is installed on the linting machine and fails to import; golden "
              "cases are plain files, so `tests/compiler/test_codes.py` installs a real broken "
              "distribution instead.",
    "A44260": "is an error of `publish` only: `lint` reports the same group as the warning "
              "[A44261](#a44261) (the project may have published it); publish looks the group up in the "
              "project's published `kind: approvers` first.",
}

# The example shown for a code, when the first failing case by name is not the most telling one.
PREFERRED = {
    "A44001": "A44001_unclosed_flow_sequence",
    "A44002": "A44002_duplicate_keys",
    "A44201": "A44201_missing_timeout",
    "A44004": "A44004_latin1_byte",
    "A44006": "A44006_billion_laughs",
    "A44010": "A44010_unrecognised_mapping",
    "A44101": "A44101_unknown_connector_param",
    "A44103": "A44103_retry_not_mapping",
    "A44105": "A44105_no_unit",
    "A44211": "A44211_plugin_not_installed",
    "A44302": "A44302_later_step",
}

INTRO = """\
# Diagnostics

`a44 automation lint PATHS...` compiles every YAML file under `PATHS` and reports every problem it finds, not
just the first, one per line:

```text
file:line:col: severity CODE message
  hint: what to do about it
```

Lines and columns are 1-based and point into your file (inside a quoted or block scalar, at the character of
the expression or template that is wrong). The exit code is 0 when there is no error (warnings alone pass,
unless `--strict`), 1 when there is a finding that fails, 2 on a usage error. `--format json|github|sarif`
give the same findings for tools.

Codes are stable. Ranges: A44001-A44099 YAML source, A44100-A44199 model shape, A44200-A44299 workflow rules
(steps, connectors, DAG, retry), A44300-A44399 CEL expressions (`if:`, `filter:`), A44400-A44499 Jinja2
templates, A44500-A44599 SQL, A44600-A44699 triggers and cross-file ids, A44900-A44999 lint plumbing.

Severity **warning** marks a reference the linted files cannot settle or a policy that is legal but
suspicious; `lint --strict` (and `publish`, for references) turns those into failures.

This page is generated from the golden tests (`tests/compiler/golden/`) by
`python tests/compiler/make_diagnostics_doc.py`; `tests/compiler/test_codes.py` runs every example below
again and fails when the output shown here is no longer what the linter prints.
"""


def doc_name(case: Case) -> str:
    """`A44201_missing_timeout` -> `missing-timeout.yaml` (a code workflow case: `missing_timeout.py`, a module
    name)."""
    stem = case.name.split("_", 1)[1] if "_" in case.name else case.name
    if case.kind == "file" and case.yaml.suffix == ".py":
        return stem + ".py"
    return stem.replace("_", "-") + ".yaml"


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _escape(raw: bytes) -> str:
    """Bytes that are not UTF-8, a byte order mark and carriage returns are written `\\xNN`."""
    bom = ""
    if raw.startswith(b"\xef\xbb\xbf"):  # keep a byte order mark visible
        bom, raw = "\\xef\\xbb\\xbf", raw[3:]
    return bom + raw.decode("utf-8", "backslashreplace").replace("\r", "\\x0d")


def _unescape(text: str) -> bytes:
    out = bytearray()
    pos = 0
    for m in re.finditer(r"\\x([0-9a-f]{2})", text):
        out += text[pos:m.start()].encode("utf-8")
        out.append(int(m.group(1), 16))
        pos = m.end()
    out += text[pos:].encode("utf-8")
    return bytes(out)


def _block(lang: str, content: str) -> list[str]:
    lines = ["```" + lang]
    if content:
        lines.extend(content[:-1].split("\n") if content.endswith("\n") else content.split("\n"))
    lines.append("```")
    return lines


def _file_example(name: str, raw: bytes) -> list[str]:
    if name.endswith(".py"):
        return [f"<!-- file: {name} -->", f"`{name}`:", "", *_block("python", raw.decode("utf-8")), ""]
    if _is_utf8(raw) and b"\r" not in raw:
        text = raw.decode("utf-8")
        if text.startswith("\ufeff"):
            return [f"<!-- file: {name} bom -->", f"`{name}` (starts with a UTF-8 byte order mark):", "",
                    *_block("yaml", text[1:]), ""]
        return [f"<!-- file: {name} -->", f"`{name}`:", "", *_block("yaml", text), ""]
    return [f"<!-- file: {name} escaped -->",
            f"`{name}` (carriage returns and bytes that are not UTF-8 are shown as `\\xNN`):", "",
            *_block("yaml", _escape(raw)), ""]


def _section_example(case: Case) -> tuple[list[str], str]:
    """(markdown lines of the example's input, lint output) - the output computed now, under the doc names."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if case.kind == "file":
            name = doc_name(case)
            raw = case.yaml.read_bytes()
            (work / name).write_bytes(raw)
            lines += _file_example(name, raw)
            args = [name]
        elif case.kind == "dir":
            args = ["."]
            lines += ["Files linted together:", ""]
            for p in sorted(case.dir.iterdir()):
                raw = p.read_bytes()
                (work / p.name).write_bytes(raw)
                if p.suffix in (".yaml", ".yml"):
                    lines += _file_example(p.name, raw)
                else:
                    lines += [f"<!-- file: {p.name} -->", f"`{p.name}`:", "", *_block("text", raw.decode()), ""]
        else:
            name = doc_name(case)
            GENERATORS[case.name](work, Path(name).stem)
            args = [name]
            lines += [f"<!-- generated: {case.name} {name} -->",
                      f"`{name}`: {GENERATED_INPUT[case.name]}.", ""]
        out, _err, _code = run_lint(work, args)
    said = "prints nothing and exits 0:" if not out else "prints:"
    lines += [f"<!-- lint: {' '.join(args)} -->", f"`a44 automation lint {' '.join(args)}` {said}", "",
              *_block("text", out), ""]
    return lines, out


def render() -> str:
    from anthares44.automation.diagnostics import CODES

    import_all_codes()
    cases = all_cases()
    by_code: dict[str, list[Case]] = {}
    for c in cases:
        if c.code:
            by_code.setdefault(c.code, []).append(c)
    lines = [INTRO, "## Index", "", "| Code | Severity | Title |", "|---|---|---|"]
    for code, info in sorted(CODES.items()):
        lines.append(f"| [{code}](#{code.lower()}) | {info.severity.value} | {info.title} |")
    lines.append("")
    for code, info in sorted(CODES.items()):
        lines += [f"## {code}", "", f"**{info.title}** — severity: {info.severity.value}.", ""]
        if code in NO_EXAMPLE:
            lines += [f"No example: this code {NO_EXAMPLE[code]}", ""]
            continue
        mine = by_code.get(code, [])
        failing = sorted((c for c in mine if not c.passing and c.kind != "orphan"),
                         key=lambda c: (c.name != PREFERRED.get(code),
                                        {"file": 0, "dir": 1, "generated": 2}[c.kind], c.name))
        if not failing:
            raise SystemExit(f"{code} has no failing golden case; add one under tests/compiler/golden/{code}/")
        ex_lines, _ = _section_example(failing[0])
        lines += ["### Fails", "", *ex_lines]
        passing = [c for c in mine if c.passing and c.kind == "file"]
        if passing:
            ok = sorted(passing, key=lambda c: c.name)[0]
            ok_lines, out = _section_example(ok)
            assert out == "", f"{ok.id} is meant to pass but prints {out!r}"
            lines += ["### Passes", "", *ok_lines]
    return "\n".join(lines).rstrip("\n") + "\n"


def import_all_codes() -> None:
    """Import every module that registers codes, so CODES is complete."""
    import anthares44.automation.compiler.documents  # noqa: F401
    import anthares44.automation.compiler.lint  # noqa: F401
    import anthares44.automation.compiler.lower  # noqa: F401
    import anthares44.automation.compiler.project_config  # noqa: F401
    import anthares44.automation.compiler.rules  # noqa: F401
    import anthares44.automation.compiler.source  # noqa: F401
    import anthares44.automation.compiler.validation  # noqa: F401
    import anthares44.automation.grammar  # noqa: F401
    import anthares44.automation.sdk.lint  # noqa: F401


# ---------------------------------------------------------------- reading the doc back
@dataclass
class DocExample:
    code: str
    files: dict[str, bytes] = field(default_factory=dict)
    generated: tuple[str, str] | None = None    # (generator case name, file name)
    args: list[str] = field(default_factory=list)
    output: str = ""


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _fence_after(text: str, pos: int) -> tuple[str, int]:
    m = _FENCE.search(text, pos)
    assert m is not None, f"no fenced block after offset {pos}"
    return m.group(2), m.end()


def parse(text: str) -> list[DocExample]:
    """Every example of the doc (both 'Fails' and 'Passes'), with its files and expected output."""
    examples: list[DocExample] = []
    sections = re.split(r"^## (A44\d{3})\s*$", text, flags=re.MULTILINE)
    for code, body in zip(sections[1::2], sections[2::2]):
        current = DocExample(code)
        for m in re.finditer(r"<!-- (file|generated|lint): (.*?) -->", body):
            what, arg = m.group(1), m.group(2).split()
            if what == "file":
                content, _ = _fence_after(body, m.end())
                if "escaped" in arg[1:]:
                    raw = _unescape(content)
                else:
                    raw = content.encode("utf-8")
                    if "bom" in arg[1:]:
                        raw = "\ufeff".encode("utf-8") + raw
                current.files[arg[0]] = raw
            elif what == "generated":
                current.generated = (arg[0], arg[1])
            else:
                current.args = arg
                current.output, _ = _fence_after(body, m.end())
                examples.append(current)
                current = DocExample(code)
    return examples


def run_example(ex: DocExample, workdir: Path) -> str:
    for name, raw in ex.files.items():
        (workdir / name).write_bytes(raw)
    if ex.generated:
        GENERATORS[ex.generated[0]](workdir, Path(ex.generated[1]).stem)
    out, _err, _code = run_lint(workdir, ex.args)
    return out


def main() -> int:
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
