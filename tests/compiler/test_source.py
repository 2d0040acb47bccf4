"""YAML source layer (`compiler/source.py`): positions of keys and values, columns inside scalars, and the
inputs that must become diagnostics instead of tracebacks (duplicate keys, tabs, BOM, bad bytes, several
documents, alias bombs, oversize and empty files, merge keys)."""

from __future__ import annotations

import time

import pytest

from anthares44.automation.compiler.source import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    SourceFile,
    load_bytes,
    load_file,
    load_text,
)
from anthares44.automation.diagnostics import Span


def codes(src: SourceFile) -> list[str]:
    return [d.code for d in src.diagnostics]


def at(src: SourceFile) -> list[tuple[str, int, int]]:
    return [(d.code, d.line, d.col) for d in src.diagnostics]


def char_at(text: str, span: Span) -> str:
    """The text a span covers (single-line spans), to check spans by content, not only numbers."""
    line = text.split("\n")[span.line - 1]
    assert span.end_line == span.line
    return line[span.col - 1:span.end_col - 1]


WF = """name: invoice-settle
version: 3
steps:
  - id: reserve-funds
    uses: http
    timeout: 15s
    retry: { max: 5, strategy: exponential-jitter }
  - id: mark-paid
    uses: sql/execute
    query: "update invoices set status='paid' where id = $1"
"""


# ---------------------------------------------------------------- positions
def test_plain_document_parses_to_plain_data():
    src = load_text(WF, "w.yaml")
    assert src.parsed and src.diagnostics == []
    assert src.data["version"] == 3
    assert src.data["steps"][0]["retry"] == {"max": 5, "strategy": "exponential-jitter"}
    assert src.data["steps"][1]["query"] == "update invoices set status='paid' where id = $1"


def test_key_and_value_spans():
    src = load_text(WF, "w.yaml")
    assert src.span(("name",), key=True) == Span(1, 1, 1, 5)
    assert src.span(("name",)) == Span(1, 7, 1, 21)
    assert char_at(WF, src.span(("name",))) == "invoice-settle"
    assert src.span(("version",)) == Span(2, 10, 2, 11)
    assert src.span(("steps", 0, "id")) == Span(4, 9, 4, 22)
    assert char_at(WF, src.span(("steps", 0, "id"), key=True)) == "id"
    assert char_at(WF, src.span(("steps", 0, "timeout"))) == "15s"
    # inside a flow mapping
    assert char_at(WF, src.span(("steps", 0, "retry", "strategy"))) == "exponential-jitter"
    assert char_at(WF, src.span(("steps", 0, "retry", "max"), key=True)) == "max"
    # a quoted value's span includes its quotes
    q = src.span(("steps", 1, "query"))
    assert (q.line, q.col) == (10, 12) and WF.split("\n")[9][q.col - 1] == '"'
    # a list item has no key span: asking for the key gives the item
    assert src.span(("steps", 1), key=True) == src.span(("steps", 1))
    assert src.span(("steps", 1)).line == 8


def test_span_of_a_missing_path_falls_back_to_the_nearest_ancestor():
    src = load_text(WF, "w.yaml")
    assert src.span(("steps", 1, "timeout")) == src.span(("steps", 1))
    assert src.span(("steps", 7, "x")) == src.span(("steps",))
    assert src.span(("nope",)) == src.span(())


def _scalar(text: str, path: tuple, needle: str, length: int | None = None):
    src = load_text(text, "w.yaml")
    assert src.diagnostics == []
    value = src.data
    for p in path:
        value = value[p]
    offset = value.index(needle)
    return src, value, src.scalar_span(path, offset, length or len(needle))


def test_scalar_span_plain():
    text = "steps:\n  - if: input.amount > 100 && input.cur == 'BRL'\n"
    _, _, span = _scalar(text, ("steps", 0, "if"), "input.cur")
    assert span == Span(2, 31, 2, 40)
    assert char_at(text, span) == "input.cur"


def test_scalar_span_plain_folded_over_lines():
    text = "a: first\n  second {{ x }}\n"
    _, value, span = _scalar(text, ("a",), "{{")
    assert value == "first second {{ x }}"
    assert span == Span(2, 10, 2, 12)


def test_scalar_span_single_quoted_with_doubled_quotes():
    text = "q: 'it''s ''{{ x }}'' ok'\n"
    _, value, span = _scalar(text, ("q",), "{{ x }}")
    assert value == "it's '{{ x }}' ok"
    # each '' is one character of the value but two of the file
    assert char_at(text, span) == "{{ x }}"
    assert span.col == 13


def test_scalar_span_double_quoted_with_escapes():
    text = 'd: "a\\\\b \\"{{ y }}\\" \\u00e9z"\n'
    assert text == 'd: "a\\\\b \\"{{ y }}\\" \\u00e9z"\n'
    _, value, span = _scalar(text, ("d",), "{{ y }}")
    assert value == 'a\\b "{{ y }}" \u00e9z'
    assert char_at(text, span) == "{{ y }}"
    _, _, z = _scalar(text, ("d",), "z")
    assert char_at(text, z) == "z"           # after a 6-character \u escape that is one character
    _, _, e = _scalar(text, ("d",), "\u00e9")
    assert text.split("\n")[0][e.col - 1:e.col + 5] == "\\u00e9"


def test_scalar_span_block_literal():
    text = "steps:\n  - id: a\n    if: |\n      input.a == 1 &&\n        inpt.b == 2\n"
    _, value, span = _scalar(text, ("steps", 0, "if"), "inpt")
    assert value == "input.a == 1 &&\n  inpt.b == 2\n"
    assert span == Span(5, 9, 5, 13)
    assert char_at(text, span) == "inpt"


def test_scalar_span_block_folded():
    text = "a: >-\n  one\n  two {{ z }}\n"
    _, value, span = _scalar(text, ("a",), "{{ z }}")
    assert value == "one two {{ z }}"
    assert char_at(text, span) == "{{ z }}"


def test_scalar_span_offsets_are_clamped():
    src = load_text("a: abc\n", "w.yaml")
    assert src.scalar_span(("a",), 100, 5) == Span(1, 6, 1, 7)
    assert src.scalar_span(("a",), -3, 1) == Span(1, 4, 1, 5)
    assert src.scalar_span(("missing",), 0, 1) == src.span(())


def test_cel_error_column_lands_inside_the_yaml_scalar():
    """End to end: the checker's offset inside `if:` becomes the file column of the wrong identifier."""
    from anthares44.automation.compiler.lint import compile_sources

    text = ("name: x\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 1s\n"
            "    if: 'input.ok == true && inptu.b == ''x'''\n")
    res = compile_sources([load_text(text, "w.yaml")], lower=False)
    [d] = res.diagnostics
    assert d.code == "A44301" and (d.line, d.col) == (7, 30)
    assert text.split("\n")[6][d.col - 1:d.end_col - 1] == "inptu"


def test_scalars_keep_yaml_types_but_never_datetimes():
    src = load_text("a: 0x1f\nb: 0o17\nc: 1_000\nd: true\ne: ~\nf: 2026-07-19\ng: .inf\nh: '12'\ni: 1.5\n",
                    "w.yaml")
    assert src.data == {"a": 31, "b": 15, "c": 1000, "d": True, "e": None, "f": "2026-07-19",
                        "g": float("inf"), "h": "12", "i": 1.5}


# ---------------------------------------------------------------- duplicate keys
def test_every_duplicate_key_is_reported():
    text = "name: a\nversion: 1\nname: b\nsteps:\n  - id: x\n    id: y\n    id: z\n    r: {m: 1, m: 2}\nname: c\n"
    src = load_text(text, "w.yaml")
    assert at(src) == [("A44002", 3, 1), ("A44002", 6, 5), ("A44002", 7, 5), ("A44002", 8, 15),
                       ("A44002", 9, 1)]
    first = src.diagnostics[0]
    assert "'name'" in first.message and "line 1" in first.message
    assert "line 5" in src.diagnostics[2].message        # the third 'id' points at the first one
    assert src.data["name"] == "a" and src.data["steps"][0]["id"] == "x"   # the first value is kept


# ---------------------------------------------------------------- tabs
def test_tab_indentation_is_reported_per_line():
    src = load_text("a:\n\tb: 1\n\tc: 2\n  \td: 3\n", "w.yaml")
    assert at(src) == [("A44003", 2, 1), ("A44003", 3, 1), ("A44003", 4, 3)]
    assert src.data is None


def test_tabs_inside_block_scalars_and_values_are_content():
    text = "a: |\n  first\n  \tindented with a tab\n  \tagain\nb: \"x\\ty\"\nc: 'p\tq'\n"
    src = load_text(text, "w.yaml")
    assert src.diagnostics == []
    assert src.data["a"] == "first\n\tindented with a tab\n\tagain\n"
    assert src.data["c"] == "p\tq"


def test_tab_after_a_block_scalar_ends_is_indentation_again():
    src = load_text("a: |\n  text\nb:\n\tc: 1\n", "w.yaml")
    assert at(src) == [("A44003", 4, 1)]


# ---------------------------------------------------------------- encodings
def test_bom_is_accepted_and_positions_ignore_it():
    src = load_bytes(b"\xef\xbb\xbfname: x\nversion: 1\n", "w.yaml")
    assert src.diagnostics == [] and src.data == {"name": "x", "version": 1}
    assert src.span(("name",), key=True) == Span(1, 1, 1, 5)


@pytest.mark.parametrize("raw, line, col, byte", [
    (b"name: caf\xe9\n", 1, 10, 0xE9),                       # latin-1 e-acute
    (b"a: 1\nb: \xc3\xa9\xc3\xa9\xff\n", 2, 6, 0xFF),           # columns count characters, not bytes
    (b"\xef\xbb\xbfname: \xc3\xa9\xff\n", 1, 8, 0xFF),          # a BOM shifts neither offset nor column
    (b"a: \xc3\n", 1, 4, 0xC3),                               # truncated sequence
])
def test_non_utf8_is_reported_at_the_bad_byte(raw, line, col, byte):
    src = load_bytes(raw, "w.yaml")
    [d] = src.diagnostics
    assert (d.code, d.line, d.col) == ("A44004", line, col)
    assert f"0x{byte:02x}" in d.message
    assert f"offset {raw.index(bytes([byte]), raw.find(b' ') if raw.startswith(b'a: 1') else 0)}" in d.message
    assert not src.parsed


# ---------------------------------------------------------------- documents
def test_second_document_is_reported_once_and_the_first_is_kept():
    src = load_text("a: 1\n---\nb: 2\n---\nc: 3\n", "w.yaml")
    assert at(src) == [("A44005", 3, 1)]
    assert src.parsed and src.data == {"a": 1}


def test_explicit_start_and_end_markers_are_one_document():
    src = load_text("---\na: 1\n...\n", "w.yaml")
    assert src.diagnostics == [] and src.data == {"a": 1}


# ---------------------------------------------------------------- size and shape limits
def test_billion_laughs_is_bounded_and_fast():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefghi", "bcdefghij"):
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 10)}]")
    text = "\n".join(lines) + "\n"    # 10**10 strings if expanded
    # CPU time, not wall time: the machine is shared; expanded, this would take hours, not seconds
    t0 = time.process_time()
    src = load_text(text, "w.yaml")
    assert time.process_time() - t0 < 10.0
    assert codes(src) == ["A44006"]
    assert src.data is None and src.nodes == {} and not src.parsed
    assert "100,000" in src.diagnostics[0].message


def test_small_aliases_are_expanded():
    src = load_text("a: &x {k: [1, 2]}\nb: *x\n", "w.yaml")
    assert src.diagnostics == [] and src.data == {"a": {"k": [1, 2]}, "b": {"k": [1, 2]}}
    # the key is where the alias is used; the value is the anchored node, where its content is written
    assert src.span(("b",), key=True) == Span(2, 1, 2, 2)
    assert src.span(("b",)).line == 1 and src.span(("b", "k", 1)) == Span(1, 15, 1, 16)


def test_deep_nesting_is_a_diagnostic():
    src = load_text("a: " + "[" * (MAX_DEPTH + 50) + "]" * (MAX_DEPTH + 50) + "\n", "w.yaml")
    assert codes(src) == ["A44006"] and "levels deep" in src.diagnostics[0].message


def test_absurd_nesting_does_not_raise():
    t0 = time.perf_counter()
    src = load_text("a: " + "[" * 5000 + "]" * 5000 + "\n", "w.yaml")
    assert codes(src) == ["A44006"]
    assert time.perf_counter() - t0 < 10


def test_oversize_file_is_refused_without_parsing():
    big = b"a: 1\n# " + b"x" * MAX_FILE_BYTES + b"\n"
    src = load_bytes(big, "w.yaml")
    assert at(src) == [("A44007", 1, 1)] and not src.parsed
    exact = b"a: 1\n#" + b"x" * (MAX_FILE_BYTES - 7) + b"\n"
    assert len(exact) == MAX_FILE_BYTES
    assert load_bytes(exact, "w.yaml").diagnostics == []


def test_load_file_reads_at_most_one_byte_over_the_limit(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_bytes(b"a: 1\n#" + b"x" * (2 * MAX_FILE_BYTES) + b"\n")
    src = load_file(str(p), "big.yaml")
    assert codes(src) == ["A44007"] and src.path == "big.yaml"


def test_unreadable_paths_are_diagnostics(tmp_path):
    assert codes(load_file(str(tmp_path / "missing.yaml"))) == ["A44901"]
    assert codes(load_file(str(tmp_path))) == ["A44901"]     # a directory is not a file


@pytest.mark.parametrize("text", ["", "\n\n", "   \n", "# only a comment\n", "---\n", "---\n...\n",
                                  "\ufeff"])
def test_empty_files(text):
    src = load_text(text.lstrip("\ufeff"), "w.yaml") if text != "\ufeff" else load_bytes(b"\xef\xbb\xbf", "w.yaml")
    assert at(src) == [("A44008", 1, 1)]


# ---------------------------------------------------------------- keys
def test_merge_keys_are_reported_not_merged():
    text = "base: &b {x: 1}\nitem:\n  <<: *b\n  y: 2\n"
    src = load_text(text, "w.yaml")
    assert at(src) == [("A44009", 3, 3)]
    assert src.data["item"] == {"y": 2}


def test_complex_keys_are_reported():
    src = load_text("? [a, b]\n: 1\n? {c: d}\n: 2\nok: 3\n", "w.yaml")
    assert at(src) == [("A44009", 1, 3), ("A44009", 3, 3)]
    assert src.data == {"ok": 3}


def test_non_string_scalar_keys_become_strings():
    src = load_text("1: a\ntrue: b\n", "w.yaml")
    assert src.data == {"1": "a", "true": "b"}


# ---------------------------------------------------------------- syntax errors
@pytest.mark.parametrize("text, line, col", [
    ("a: [1, 2\n", 2, 1),
    ("a: 1\n b: 2\n", 2, 3),
    ("a: \"open\n", 2, 1),
    ("a: b: c\n", 1, 5),
    ("- a\nb: 1\n", 2, 1),
])
def test_syntax_errors_have_positions(text, line, col):
    src = load_text(text, "w.yaml")
    [d] = src.diagnostics
    assert (d.code, d.line, d.col) == ("A44001", line, col)
    assert d.message.startswith("YAML syntax error: ")
    assert not src.parsed


def test_unicode_line_separators_do_not_move_positions():
    """libyaml counts U+2028/U+2029 as line breaks, editors and our scalar spans do not: positions come from the
    marks' character index (found by the YAML fuzz suite: a duplicate key reported at line 8 of a 6-line file)."""
    text = "name: a\nversion: {x: \u2028, x: \u2029, x: 1}\nsteps: []\n"
    src = load_bytes(text.encode("utf-8"), "wf.yaml")
    dups = [d for d in src.diagnostics if d.code == "A44002"]
    assert dups and all(d.line == 2 for d in dups), src.diagnostics
    assert src.span(("steps",), key=True).line == 3
