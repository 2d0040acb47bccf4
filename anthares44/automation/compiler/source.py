"""YAML source with positions: bytes in, plain data plus a position for every node out.

We compose with ruamel.yaml (node graph with marks) and build plain Python values ourselves, so that
  * every mapping key and value keeps its span, addressable by path (`("steps", 0, "timeout")`),
  * every duplicate key is reported (ruamel's constructor stops at the first),
  * aliases are expanded under a budget (a billion-laughs file is a diagnostic, not an OOM),
  * tabs, bad encodings, oversized files and extra documents are diagnostics, never tracebacks.
Scalars keep their raw source text too, so a column inside an expression maps back to the file.
"""

from __future__ import annotations

import bisect
import io
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ruamel.yaml.error import StreamMark

from ..diagnostics import Diagnostic, Span, register

A44001 = register("A44001", "YAML syntax error")
A44002 = register("A44002", "duplicate mapping key")
A44003 = register("A44003", "tab character in indentation")
A44004 = register("A44004", "file is not valid UTF-8")
A44005 = register("A44005", "more than one YAML document in a file")
A44006 = register("A44006", "alias expansion too large (possible billion-laughs)")
A44007 = register("A44007", "file too large")
A44008 = register("A44008", "file is empty")
A44009 = register("A44009", "mapping key is not a plain scalar")

MAX_FILE_BYTES = 1024 * 1024
MAX_NODES = 100_000  # values built, counting every alias expansion
MAX_DEPTH = 200

Path = tuple[str | int, ...]   # a location in a YAML document: mapping keys and list indexes


@dataclass
class NodeInfo:
    value: Span
    key: Span | None = None
    style: str | None = None     # scalar style: None plain, "'", '"', '|', '>'
    start: int = 0               # character offsets of the node in the text
    end: int = 0


@dataclass
class SourceFile:
    """One YAML file: its text, the first document as plain data, positions by path, and diagnostics."""

    path: str
    text: str = ""
    data: Any = None
    nodes: dict[Path, NodeInfo] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    parsed: bool = False
    _line_starts: list[int] = field(default_factory=list, repr=False, compare=False)

    def line_col(self, index: int) -> tuple[int, int]:
        """1-based (line, column) of character `index` of the text: a binary search over the line starts, which
        are found once (counting newlines from the top for every diagnostic would be quadratic)."""
        starts = self._line_starts
        if not starts:
            starts.append(0)
            find = self.text.find
            nl = find("\n")
            while nl >= 0:
                starts.append(nl + 1)
                nl = find("\n", nl + 1)
        line = bisect.bisect_right(starts, index)
        return line, index - starts[line - 1] + 1

    def span(self, path: Path, *, key: bool = False) -> Span:
        """Span of the node at `path` (or of its key); falls back to the nearest known ancestor."""
        p = tuple(path)
        while True:
            info = self.nodes.get(p)
            if info is not None:
                if key and info.key is not None:
                    return info.key
                return info.value
            if not p:
                return Span(1, 1, 1, 1)
            p = p[:-1]

    def scalar_span(self, path: Path, offset: int, length: int = 1) -> Span:
        """Span of characters [offset, offset+length) of the scalar value at `path`, in file coordinates."""
        info = self.nodes.get(tuple(path))
        if info is None:
            return self.span(path)
        index = _value_index_map(self.text, info)
        if not index:
            return info.value
        start = index[min(max(offset, 0), len(index) - 1)]
        last = index[min(max(offset + max(length, 1) - 1, 0), len(index) - 1)]
        sl, sc = self.line_col(start)
        el, ec = self.line_col(last)
        return Span(sl, sc, el, ec + 1)

    def mark_span(self, start: StreamMark, end: StreamMark | None = None) -> Span:
        """Span between two YAML marks, from their character indexes: libyaml counts U+2028/U+2029 (and NEL) as line
        breaks and the pure parser does not, while editors, CI annotations and our own scalar spans count `\n`
        only, so the marks' own line/column are not used."""
        sl, sc = self.line_col(start.index)
        if end is None:
            return Span(sl, sc, sl, sc + 1)
        el, ec = self.line_col(end.index)
        return Span(sl, sc, el, max(ec, sc + 1 if sl == el else 1))

    def error(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic.at(code, message, self.path, span, hint=hint))


def load_file(fs_path: str, display: str | None = None) -> SourceFile:
    """Read and parse a file; I/O failures become diagnostics too."""
    display = display or fs_path
    try:
        with open(fs_path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        src = SourceFile(display)
        src.error("A44901", f"cannot read file: {exc.strerror or exc}", Span(1, 1, 1, 1))
        return src
    return load_bytes(raw, display)


def load_bytes(raw: bytes, display: str) -> SourceFile:
    src = SourceFile(display)
    if len(raw) > MAX_FILE_BYTES:
        src.error(A44007, f"file is larger than {MAX_FILE_BYTES // 1024} KiB; workflow files are small",
                  Span(1, 1, 1, 1), hint="split it, or move data out of the definition")
        return src
    bom = len(_BOM) if raw.startswith(_BOM) else 0
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + bom  # the decoder counts from after the byte order mark
        line = raw.count(b"\n", 0, at) + 1
        line_start = max(raw.rfind(b"\n", 0, at) + 1, bom)
        col = len(raw[line_start:at].decode("utf-8")) + 1  # in characters, like every other column
        src.error(A44004, f"byte 0x{raw[at]:02x} at offset {at} is not valid UTF-8",
                  Span(line, col, line, col + 1), hint="save the file as UTF-8")
        return src
    return load_text(text, display, src)


_BOM = b"\xef\xbb\xbf"


def load_text(text: str, display: str, src: SourceFile | None = None) -> SourceFile:
    src = src or SourceFile(display)
    if "\r" in text:  # YAML reads CR and CRLF as line breaks: count lines (and map columns) the same way
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    src.text = text
    tabs = _indenting_tabs(text) if "\t" in text else []
    for line, col in tabs:
        src.error(A44003, "tab character used for indentation; YAML allows only spaces",
                  Span(line, col, line, col + 1), hint="replace the tab with spaces")
    if tabs:
        return src
    if not text.strip() or all(ln.strip().startswith("#") or not ln.strip() for ln in text.splitlines()):
        src.error(A44008, "file has no content", Span(1, 1, 1, 1))
        return src
    _compose(src)
    return src


def _indenting_tabs(text: str) -> list[tuple[int, int]]:
    """(line, column) of every tab used for indentation. A tab inside a literal/folded block scalar's content
    is content, not indentation.

    Block content lines are all indented at least as much as the block's content, and the header line
    (`key: |`) is indented less than every line after it. So a tab is content when one of the lines that
    enclose its line (each indented less than every non-blank line after it, up to the last line at column 1)
    is indented less than the tab and ends in a block indicator. One pass keeps those enclosing lines on a
    stack, each with whether a header is at or below it: walking back from every tab would be quadratic."""
    found: list[tuple[int, int]] = []
    indents: list[int] = []          # of the enclosing lines, strictly increasing
    header_below: list[bool] = []    # a block header is at or below this entry
    for number, line in enumerate(text.split("\n"), 1):
        spaces = len(line) - len(line.lstrip(" "))
        if line[spaces:spaces + 1] == "\t":
            below = bisect.bisect_left(indents, spaces)   # enclosing lines indented less than the tab
            if not (below and header_below[below - 1]):
                found.append((number, spaces + 1))
        if not line.strip():
            continue
        while indents and indents[-1] >= spaces:
            indents.pop()
            header_below.pop()
        header_below.append(bool(_BLOCK_HEADER.search(line)) or bool(header_below and header_below[-1]))
        indents.append(spaces)
    return found


_BLOCK_HEADER = re.compile(r"[|>][-+0-9]*[ \t]*(#.*)?$")


def _compose(src: SourceFile) -> None:
    # ruamel is imported here: the module stays importable (and cheap) for tools that only need spans.
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        with warnings.catch_warnings():  # e.g. ReusedAnchorWarning: legal YAML, and never our stderr's business
            warnings.simplefilter("ignore")
            try:
                # libyaml (ruamel.yaml.clib) composes ~10x faster than the pure scanner, with the same marks;
                # but it is YAML 1.1 and refuses some valid 1.2 (`{url: https://x}`): on any error the pure
                # 1.2 parser decides, and its message is the one users see.
                docs = list(YAML(typ="safe").compose_all(io.StringIO(src.text)))
            except (YAMLError, ValueError, RecursionError):
                docs = list(YAML(typ="rt", pure=True).compose_all(io.StringIO(src.text)))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        ctx = (exc.context or "").strip()
        msg = f"YAML syntax error: {problem}" + (f" ({ctx})" if ctx and ctx != problem else "")
        src.error(A44001, msg, src.mark_span(mark) if mark is not None else Span(1, 1, 1, 2))
        return
    except RecursionError:  # ruamel composes recursively: absurd nesting ends here
        src.error(A44006, f"document nests more than {MAX_DEPTH} levels deep", Span(1, 1, 1, 1),
                  hint="flatten the structure")
        return
    except (YAMLError, ValueError) as exc:  # composer/reader failures without marks
        src.error(A44001, f"YAML syntax error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                  Span(1, 1, 1, 1))
        return
    # an empty document (`---` and nothing else) holds no content either
    docs = [d for d in docs if d is not None and not (d.id == "scalar" and d.value == "" and d.tag.endswith(":null"))]
    if not docs:
        src.error(A44008, "file has no content", Span(1, 1, 1, 1))
        return
    for extra in docs[1:]:
        src.error(A44005, "a file holds one YAML document; found another one here", src.mark_span(extra.start_mark),
                  hint="remove the '---' separator or split the file")
        break
    builder = _Builder(src)
    try:
        src.data = builder.build(docs[0], (), None, 0)
        src.parsed = True
    except _TooLarge as exc:
        src.data = None
        src.nodes.clear()
        if exc.deep:
            src.error(A44006, f"document nests more than {MAX_DEPTH} levels deep", exc.span,
                      hint="flatten the structure")
        else:
            src.error(A44006, f"document expands to more than {MAX_NODES:,} values through aliases or nesting",
                      exc.span, hint="YAML aliases (*name) are expanded; avoid alias chains")


class _TooLarge(Exception):
    def __init__(self, span: Span, deep: bool = False):
        self.span = span
        self.deep = deep


_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_HEX, _OCT = re.compile(r"^0x[0-9a-fA-F_]+$"), re.compile(r"^0o[0-7_]+$")


class _Builder:
    """Turns a composed node graph into plain values, counting work so aliases cannot explode."""

    def __init__(self, src: SourceFile):
        self.src = src
        self.count = 0

    def build(self, node: Any, path: Path, key_span: Span | None, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            raise _TooLarge(self.src.mark_span(node.start_mark, node.end_mark), deep=depth > MAX_DEPTH)
        kind = node.id
        if path not in self.src.nodes:  # an alias reached again must not overwrite the first position
            self.src.nodes[path] = NodeInfo(self.src.mark_span(node.start_mark, node.end_mark), key_span,
                                            (getattr(node, "style", None) or None) if kind == "scalar" else None,
                                            node.start_mark.index, node.end_mark.index)
        if kind == "scalar":
            return _scalar(node)
        if kind == "sequence":
            return [self.build(child, path + (i,), None, depth + 1) for i, child in enumerate(node.value)]
        out: dict[str, Any] = {}
        first_seen: dict[str, Span] = {}
        for knode, vnode in node.value:
            self.count += 1
            kspan = self.src.mark_span(knode.start_mark, knode.end_mark)
            if knode.id != "scalar":
                self.src.error(A44009, "mapping keys must be plain strings", kspan)
                continue
            if knode.tag == "tag:yaml.org,2002:merge":
                self.src.error(A44009, "merge keys ('<<') are not supported; write the keys out", kspan)
                continue
            key = str(knode.value)
            if key in first_seen:
                self.src.error(A44002, f"duplicate key {key!r} (first defined at line {first_seen[key].line})",
                               kspan, hint="remove one of them; YAML keeps only one value")
                continue
            first_seen[key] = kspan
            out[key] = self.build(vnode, path + (key,), kspan, depth + 1)
        return out


def _scalar(node: Any) -> Any:   # ruamel's nodes: their classes lack what each kind sets (`id`, `tag`)
    tag, text = node.tag, node.value
    if getattr(node, "style", None) == ">":
        return text.replace("\a", "")  # ruamel's round-trip scanner marks fold points with BEL characters
    if getattr(node, "style", None) in ("'", '"', "|"):
        return text
    if tag.endswith(":null"):
        return None
    if tag.endswith(":bool"):
        return text.lower() == "true"
    if tag.endswith(":int"):
        t = text.replace("_", "")
        try:
            if _HEX.match(text):
                return int(t, 16)
            if _OCT.match(text):
                return int(t[2:], 8)
            if _INT.match(text):
                return int(t)
        except ValueError:
            pass
        return text
    if tag.endswith(":float"):
        low = text.lower()
        if low in (".inf", "+.inf"):
            return math.inf
        if low == "-.inf":
            return -math.inf
        if low == ".nan":
            return math.nan
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return text
    return text  # strings, timestamps (kept as text: we never want a datetime by accident)


def _value_index_map(text: str, info: NodeInfo) -> list[int]:
    """For each character of the scalar's value, the index in `text` it came from (best effort)."""
    raw = text[info.start:info.end]
    base = info.start
    style = info.style
    out: list[int] = []
    i = 0
    if style in ("'", '"'):
        i = 1
        end = len(raw) - 1
        while i < end:
            c = raw[i]
            if style == "'" and c == "'" and i + 1 < end and raw[i + 1] == "'":
                out.append(base + i)
                i += 2
            elif style == '"' and c == "\\" and i + 1 < end:
                nxt = raw[i + 1]
                width = {"x": 4, "u": 6, "U": 10}.get(nxt, 2)
                if nxt == "\n":
                    i += 2
                    while i < end and raw[i] in " \t":
                        i += 1
                    continue
                out.append(base + i)
                i += width
            elif c == "\n":
                out.append(base + i)  # folded to a space
                i += 1
                while i < end and raw[i] in " \t\n":
                    i += 1
            else:
                out.append(base + i)
                i += 1
        return out
    if style in ("|", ">"):
        nl = raw.find("\n")
        if nl < 0:
            return []
        i = nl + 1
        indent = None
        while i < len(raw):
            line_end = raw.find("\n", i)
            line_end = len(raw) if line_end < 0 else line_end
            line = raw[i:line_end]
            if line.strip():
                if indent is None:
                    indent = len(line) - len(line.lstrip(" "))
                for j in range(i + indent, line_end):
                    out.append(base + j)
            out.append(base + line_end)  # the newline (or folded space)
            i = line_end + 1
        return out
    # plain scalar: single line maps one to one; folded lines map through whitespace runs
    while i < len(raw):
        c = raw[i]
        if c == "\n":
            out.append(base + i)
            i += 1
            while i < len(raw) and raw[i] in " \t":
                i += 1
            continue
        out.append(base + i)
        i += 1
    return out
