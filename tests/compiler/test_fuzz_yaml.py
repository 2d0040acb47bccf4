"""Fuzzing the compiler front end (hypothesis): whatever the bytes, the compiler answers with diagnostics at
valid 1-based positions, never a traceback.

Three sources of input: random bytes; random YAML-ish text built from a grammar of mappings, lists and
scalars (block and flow styles, quotes, tabs, anchors and aliases, merge keys, document markers, templates,
odd unicode); and random mutations of valid workflow files (delete, duplicate or swap lines, swap, insert or
delete characters). Each input goes through `load_bytes` and `compile_sources` with lowering on, the same
path as `a44 automation lint` and `compile`.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from anthares44.automation.compiler.lint import compile_sources, lint_paths
from anthares44.automation.compiler.source import load_bytes
from anthares44.automation.diagnostics import CODES, Diagnostic, Severity

HERE = Path(__file__).resolve().parent
FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                print_blob=True)


def check(raw: bytes, name: str = "fuzz.yaml") -> list[Diagnostic]:
    src = load_bytes(raw, name)
    result = compile_sources([src], "lint", lower=True)
    lines = max(len(src.text.split("\n")), 1) if src.text else raw.count(b"\n") + 1
    for d in result.diagnostics:
        assert d.code in CODES, d
        assert isinstance(d.severity, Severity)
        assert d.file == name
        assert isinstance(d.message, str) and d.message
        assert 1 <= d.line <= lines + 1, (d, lines)
        assert d.col >= 1 and d.end_line >= d.line, d
        assert d.end_line > d.line or d.end_col >= d.col, d
        d.format()
        d.to_dict()
    if any(d.severity is Severity.ERROR for d in result.diagnostics):
        assert result.irs == {} or all(ir is not None for ir in result.irs.values())
    for ir in result.irs.values():
        ir.model_dump_json()                # lowered IR always serialises
    # what the input reached, for --hypothesis-show-statistics: source errors, shape errors, rules, or IR
    reached = {d.code[:4] for d in result.diagnostics}
    if _in_hypothesis():
        event("IR" if result.irs else "A44" + max(reached, default="A44?")[3:] + "xx")
    return result.diagnostics


def _in_hypothesis() -> bool:
    from hypothesis.control import currently_in_test_context

    return currently_in_test_context()


# ---------------------------------------------------------------- random bytes
@FUZZ
@given(st.binary(max_size=600))
def test_random_bytes(raw):
    check(raw)


@FUZZ
@given(st.lists(st.sampled_from([b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xc3\xa9", b"\t", b"\n", b"\r\n", b"---\n",
                                 b"- ", b": ", b"a", b"{", b"}", b"[", b"]", b"&x ", b"*x", b"'", b'"', b"#",
                                 b"<<: ", b"? ", b"|\n", b">-\n", b"  ", b"\x00", b"{{ ", b" }}", b"\\"]),
                max_size=80).map(b"".join))
def test_random_yaml_tokens(raw):
    check(raw)


# ---------------------------------------------------------------- structured YAML-ish text
ODD = st.sampled_from(["", " ", "\t", "é", "日本", "\u200b", "\U0001F600", "\u2028", "\ufeff", "\x85", "\\",
                       "'", '"', "#", ":", "- ", "{{ input.x }}", "{{", "}}", "{%", "$1", "~", "null", "yes",
                       "0x1f", "1e400", ".nan", "15s", "72h", "&a", "*a", "!!str", "---", "...", "@", "`"])
WORDS = st.sampled_from(["name", "version", "steps", "id", "uses", "timeout", "retry", "max", "strategy",
                         "needs", "if", "compensate", "sleep", "with", "query", "params", "trigger", "event",
                         "cron", "tz", "type", "workflow", "kind", "concurrency", "partitionKey", "url",
                         "pass", "http", "sql/execute", "connector/x.y", "<<", "a", "b"])
SCALAR_TEXT = st.one_of(WORDS, ODD, st.integers(-5, 300).map(str),
                        st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12))


def scalar(text: str, style: str) -> str:
    if style == "'":
        return "'" + text.replace("'", "''").replace("\n", " ") + "'"
    if style == '"':
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text.replace("\n", " ")


@st.composite
def yaml_text(draw, depth: int = 0) -> str:
    """A YAML-ish document: mostly well formed, with deliberate slips (bad indents, tabs, markers)."""
    anchors: list[str] = []

    def value(d: int, indent: int) -> str:
        kind = draw(st.sampled_from(["scalar", "scalar", "map", "list", "flow", "block", "alias"]
                                    if d < 4 else ["scalar", "flow", "alias"]))
        if kind == "alias" and anchors:
            return " *" + draw(st.sampled_from(anchors))
        if kind in ("scalar", "alias"):
            return " " + scalar(draw(SCALAR_TEXT), draw(st.sampled_from(["", "'", '"'])))
        if kind == "flow":
            items = draw(st.lists(st.tuples(WORDS, SCALAR_TEXT), max_size=4))
            if draw(st.booleans()):
                return " {" + ", ".join(f"{k}: {scalar(v, draw(st.sampled_from(['', chr(39), chr(34)])))}"
                                        for k, v in items) + "}"
            return " [" + ", ".join(scalar(v, '"') for _, v in items) + "]"
        if kind == "block":
            pad = " " * (indent + 2)
            lines = draw(st.lists(SCALAR_TEXT, min_size=1, max_size=3))
            return " " + draw(st.sampled_from(["|", ">", "|-", ">+"])) + "\n" + "\n".join(
                pad + ln.replace("\n", " ") for ln in lines)
        anchor = ""
        if draw(st.integers(0, 5)) == 0:
            name = draw(st.sampled_from(["a", "b", "c"]))
            anchors.append(name)
            anchor = f" &{name}"
        pad = " " * (indent + 2)
        if kind == "map":
            keys = draw(st.lists(WORDS, min_size=1, max_size=4))
            body = "\n".join(f"{pad}{k}:{value(d + 1, indent + 2)}" for k in keys)
        else:
            n = draw(st.integers(1, 3))
            body = "\n".join(f"{pad}-{value(d + 1, indent + 2)}" for _ in range(n))
        return anchor + "\n" + body

    keys = draw(st.lists(WORDS, min_size=1, max_size=6))
    text = "\n".join(f"{k}:{value(0, 0)}" for k in keys) + "\n"
    # deliberate slips
    lines = text.split("\n")
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(lines) - 1))
        slip = draw(st.sampled_from(["tab", "dedent", "indent", "doc", "merge", "comment", "none"]))
        if slip == "tab":
            lines[i] = "\t" + lines[i].lstrip(" ")
        elif slip == "dedent":
            lines[i] = lines[i][1:]
        elif slip == "indent":
            lines[i] = " " + lines[i]
        elif slip == "doc":
            lines.insert(i, "---")
        elif slip == "merge":
            lines.insert(i, lines[i][:len(lines[i]) - len(lines[i].lstrip(" "))] + "<<: *a")
        elif slip == "comment":
            lines[i] += "  # " + draw(SCALAR_TEXT).replace("\n", " ")
    return "\n".join(lines)


@FUZZ
@given(yaml_text())
def test_structured_yaml(text):
    check(text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(yaml_text(), st.sampled_from(["\n", "\r\n", "\r"]))
def test_structured_yaml_with_other_line_ends(text, newline):
    check(text.replace("\n", newline).encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- mutations of valid files
def _valid_files() -> list[bytes]:
    files = sorted((HERE / "golden").glob("*/*_ok*.yaml"))
    files += sorted((HERE / "golden").glob("*/*_ok*/*.yaml"))
    examples = HERE.parent.parent / "examples"
    files += sorted(p for p in examples.rglob("*.yaml") if "plugins" not in p.parts)
    return [p.read_bytes() for p in files]


VALID = _valid_files()


@st.composite
def mutated(draw) -> bytes:
    raw = draw(st.sampled_from(VALID))
    text = raw.decode("utf-8", "replace")
    for _ in range(draw(st.integers(1, 4))):
        lines = text.split("\n")
        op = draw(st.sampled_from(["del_line", "dup_line", "swap_lines", "swap_chars", "insert", "delete",
                                   "indent", "dedent"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "del_line" and lines:
            del lines[i]
        elif op == "dup_line" and lines:
            lines.insert(i, lines[i])
        elif op == "swap_lines" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "indent":
            lines[i] = draw(st.sampled_from(["  ", " ", "\t"])) + lines[i]
        elif op == "dedent":
            lines[i] = lines[i][draw(st.integers(1, 3)):]
        text = "\n".join(lines)
        if op in ("swap_chars", "insert", "delete") and text:
            k = draw(st.integers(0, len(text) - 1))
            if op == "swap_chars" and k + 1 < len(text):
                text = text[:k] + text[k + 1] + text[k] + text[k + 2:]
            elif op == "insert":
                text = text[:k] + draw(st.sampled_from(list(":-[]{}'\"#&*!|>\t %{}$\\é\n") + ["{{", "}}"])) + text[k:]
            elif op == "delete":
                text = text[:k] + text[k + 1:]
    return text.encode("utf-8")


def test_there_are_valid_files_to_mutate():
    assert len(VALID) >= 40
    for raw in VALID[:5]:
        assert not [d for d in check(raw) if d.severity is Severity.ERROR and d.code != "A44211"]


@FUZZ
@given(mutated())
def test_mutated_valid_files(raw):
    check(raw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated(), min_size=2, max_size=4))
def test_mutated_files_linted_together(tmp_path_factory, files):
    """Cross-file rules (duplicate ids, references) on broken neighbours: still only diagnostics."""
    d = tmp_path_factory.mktemp("fuzz")
    for n, raw in enumerate(files):
        (d / f"f{n}.yaml").write_bytes(raw)
    result = lint_paths([str(d)], lower=True)
    for diag in result.diagnostics:
        assert diag.line >= 1 and diag.col >= 1 and diag.code in CODES


# ---------------------------------------------------------------- expressions and templates inside scalars
EXPR_TEXT = st.lists(st.sampled_from(list("abcdefinpstu.()[]{}!=<>&|+-*/%?:,'\"\\ 0123456789_\t")
                                     + ["input", "steps", "a", "trigger", "{{", "}}", "{%", "%}", "é"]),
                     max_size=30).map("".join)


@FUZZ
@given(EXPR_TEXT, EXPR_TEXT, st.sampled_from(["plain", "'", '"', "|", ">-"]))
def test_random_expressions_and_templates_in_a_valid_workflow(expr, tpl, style):
    """CEL and Jinja2 problems map back into the scalar they came from, in any scalar style."""
    def render(text: str) -> str:
        if style == "plain":
            return " " + scalar(text, "")
        if style in ("'", '"'):
            return " " + scalar(text, style)
        return f" {style}\n      " + text.replace("\n", " ")

    doc = ("name: fuzz\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 1s\n"
           "  - id: b\n    uses: http\n    timeout: 1s\n"
           f"    if:{render(expr)}\n"
           f"    url:{render(tpl)}\n")
    diags = check(doc.encode("utf-8"))
    for d in diags:
        if d.code.startswith(("A443", "A444")):
            assert d.line >= 10, d       # never above the step that holds the expression
