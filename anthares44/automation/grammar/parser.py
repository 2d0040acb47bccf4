"""Text -> syntax tree (`ast.Node`), with every problem turned into a `SyntaxProblem` (offset + message).

The lark LALR parser is built once, lazily, and shared. Tree building happens inside the parse (an inline
transformer), so nesting depth is measured as nodes are made and over-deep input is cut off without
recursion. Lark's exceptions never leave this module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from importlib import resources
from typing import Any, TypeAlias, cast

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast
from .ast import Node, make
from .literals import LiteralError, check_int, decode_int, decode_string_token, decode_uint

RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
                      "loop", "package", "namespace", "return", "var", "void", "while"})
MACROS = {"all": (2,), "exists": (2,), "exists_one": (2,), "map": (2, 3), "filter": (2,)}

# What the user sees instead of lark's terminal names.
_TERMINAL_TEXT = {
    "IDENT": "an identifier", "INT": "a number", "UINT": "a number", "FLOAT": "a number",
    "STRING": "a string", "RSTRING": "a string", "QIDENT": "a `quoted` field name", "$END": "end of input",
}


class SyntaxProblem(Exception):
    def __init__(self, message: str, offset: int, length: int = 1, code: str = "syntax") -> None:
        super().__init__(message)
        self.message, self.offset, self.length, self.code = message, offset, length, code


_lock = threading.Lock()
_parser: Lark | None = None


def _cache_path() -> str | bool:
    """Where lark keeps the analysed grammar (2-4x faster start: the lint CLI pays it on every run).
    Keyed by lark itself on grammar text, options and lark version; any failure to write it is harmless."""
    import os
    import tempfile

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "a44")
    try:
        os.makedirs(folder, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise OSError
    except OSError:
        folder = tempfile.gettempdir()
    return os.path.join(folder, "cel-parser.lark-cache")


def _get_parser() -> Lark:
    global _parser
    if _parser is None:
        with _lock:
            if _parser is None:
                text = resources.files(__package__).joinpath("cel.lark").read_text(encoding="utf-8")
                _parser = Lark(text, parser="lalr", lexer="contextual", transformer=_Build(),
                               maybe_placeholders=False, propagate_positions=False,
                               cache=_cache_path())
    return _parser


def parse(text: str) -> Node:
    """Parse CEL text. Raises SyntaxProblem (only) for any problem, including limits."""
    if len(text) > ast.MAX_TEXT:
        raise SyntaxProblem(f"expression is {len(text)} characters long; the limit is {ast.MAX_TEXT}",
                            0, 0, "limit")
    if not text.strip():
        raise SyntaxProblem("empty expression: expected an expression", 0, 0)
    parser = _get_parser()
    try:
        return _check_literals(cast(Node, parser.parse(text)))  # the inline _Build makes the tree a Node
    except SyntaxProblem:
        raise
    except UnexpectedInput as exc:
        raise _from_lark(exc, text, parser) from None
    except LarkError as exc:  # pragma: no cover - defensive: any other lark failure is still a syntax issue
        cause = getattr(exc, "orig_exc", None)
        if isinstance(cause, SyntaxProblem):
            raise cause from None
        raise SyntaxProblem(f"invalid expression: {exc}", 0, 0) from None
    except RecursionError:  # pragma: no cover - the parse is iterative; belt and braces
        raise SyntaxProblem("expression nests too deeply", 0, 0, "limit") from None


def _check_literals(root: Node) -> Node:
    """int literals are range-checked only now, after `-` has been folded into them."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.kind == "int":
            try:
                check_int(node.args[0])
            except LiteralError as exc:
                raise SyntaxProblem(str(exc), node.offset, 1) from None
        stack.extend(node.children())
    return root


def _describe(name: str, parser: Lark) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    try:
        term = parser.get_terminal(name)
    except KeyError:
        return name
    if term.pattern.type == "str":
        return f"'{term.pattern.value}'"
    return name.lower()


def _expected(names: Iterable[str], parser: Lark) -> str:
    # words ("an identifier") first, then punctuation, so a truncated list still says the useful part
    shown = sorted({_describe(n, parser) for n in names if not n.startswith("__")},
                   key=lambda s: (s.startswith("'"), s))
    if not shown:
        return "a different token"
    if len(shown) > 10:
        shown = shown[:10] + ["..."]
    return shown[0] if len(shown) == 1 else "one of " + ", ".join(shown)


def _from_lark(exc: UnexpectedInput, text: str, parser: Lark) -> SyntaxProblem:
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        at_end = tok.type == "$END"
        offset = len(text) if at_end else tok.start_pos
        found = "end of input" if at_end else f"'{tok.value}'"
        if tok.type == "IDENT" and tok.value in RESERVED:
            return SyntaxProblem(f"reserved identifier '{tok.value}' cannot be used", offset, len(tok.value))
        return SyntaxProblem(f"expected {_expected(exc.expected, parser)}, found {found}", offset,
                             0 if at_end else len(str(tok.value)))
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0  # always set by the lexer (lark types it Optional)
        ch = text[pos] if pos < len(text) else ""
        if ch in "'\"":
            return SyntaxProblem("unterminated string literal", pos)
        return SyntaxProblem(f"unexpected character {ch!r}", pos)
    if isinstance(exc, UnexpectedEOF):  # pragma: no cover - LALR reports $END as UnexpectedToken
        return SyntaxProblem("unexpected end of input", len(text), 0)
    return SyntaxProblem(str(exc), getattr(exc, "pos_in_stream", 0) or 0)  # pragma: no cover


def _limit(node: Node) -> Node:
    if node.depth > ast.MAX_DEPTH:
        raise SyntaxProblem(f"expression nests more than {ast.MAX_DEPTH} levels deep", node.offset, 1, "limit")
    if node.size > ast.MAX_NODES:
        raise SyntaxProblem(f"expression has more than {ast.MAX_NODES} parts", node.offset, 1, "limit")
    return node


def _qualified(node: Node) -> str | None:
    """`a.b.C` as a dotted name when the node is only identifiers and selections, else None."""
    parts = []
    while node.kind == "select":
        parts.append(node.args[1])
        node = node.args[0]
    if node.kind != "ident":
        return None
    parts.append(node.args[0])
    return ".".join(reversed(parts))


# what lark hands each callback: its children, tokens mixed with the nodes and helper lists built below them
Children: TypeAlias = list[Any]


def _start(tok: Token) -> int:
    """A lexed token's offset (lark types it Optional, for tokens made by hand; the lexer always sets it)."""
    assert tok.start_pos is not None
    return tok.start_pos


class _Build(Transformer[Token, Node]):
    """Inline tree builder: every callback returns an `ast.Node` (or a helper list)."""

    # -- literals -----------------------------------------------------------------------------
    def literal(self, children: Children) -> Node:
        tok: Token = children[0]
        pos, t = _start(tok), tok.type
        try:
            if t == "INT":
                return make("int", pos, decode_int(tok.value))  # range checked after negation folds
            if t == "UINT":
                return make("uint", pos, int(decode_uint(tok.value)))
            if t == "FLOAT":
                return make("double", pos, repr(float(tok.value)))
            if t in ("STRING", "RSTRING"):
                val, _ = decode_string_token(tok.value)
                if isinstance(val, bytes):
                    return make("bytes", pos, val.hex())
                return make("string", pos, val)
        except LiteralError as exc:
            raise SyntaxProblem(str(exc), pos + exc.pos, len(tok.value) if t != "STRING" else 1) from None
        if t == "NULL":
            return make("null", pos)
        return make("bool", pos, t == "TRUE")

    # -- names and calls ----------------------------------------------------------------------
    def _name(self, children: Children) -> tuple[str, int]:
        if children[0].type == "DOT":
            return "." + children[1].value, children[0].start_pos
        tok = children[0]
        if tok.value in RESERVED:
            raise SyntaxProblem(f"reserved identifier '{tok.value}' cannot be used", tok.start_pos,
                                len(tok.value))
        return tok.value, tok.start_pos

    def ident(self, children: Children) -> Node:
        name, pos = self._name(children)
        return make("ident", pos, name)

    def args(self, children: Children) -> list[Any]:
        return children[0] if children else []

    def exprlist(self, children: Children) -> list[Any]:
        # left-recursive in the grammar (so a trailing comma is LALR-friendly): [list, item] or [item]
        if len(children) == 2:
            items: list[Any] = children[0]
            return items + [children[-1]]
        return [children[0]]

    def global_call(self, children: Children) -> Node:
        name, pos = self._name(children)
        args = children[-1]
        if name == "has":
            if len(args) != 1 or args[0].kind != "select":
                raise SyntaxProblem("has() takes one field selection, such as has(data.amount)", pos, 3)
            sel = args[0]
            return _limit(make("has", pos, sel.args[0], sel.args[1]))
        return _limit(make("call", pos, name, None, args))

    def method_call(self, children: Children) -> Node:
        target, _dot, name_tok, _lpar, args = children
        name, pos = name_tok.value, name_tok.start_pos
        if name in MACROS and len(args) in MACROS[name]:
            var = args[0]
            if var.kind != "ident" or var.args[0].startswith("."):
                raise SyntaxProblem(f"{name}() macro: the first argument must be a simple name",
                                    var.offset, 1)
            return _limit(make("comp", pos, name, target, var.args[0], None, args[1:]))
        return _limit(make("call", pos, name, target, args))

    def select(self, children: Children) -> Node:
        target, _dot, name_tok = children
        name = name_tok.value[1:-1] if name_tok.type == "QIDENT" else name_tok.value
        return _limit(make("select", name_tok.start_pos, target, name))

    def index(self, children: Children) -> Node:
        target, lbrack, idx = children
        return _limit(make("index", lbrack.start_pos, target, idx))

    def message(self, children: Children) -> Node:
        target, lbrace, fields = children
        name = _qualified(target)
        if name is None:
            raise SyntaxProblem("'{' here must follow a message type name", lbrace.start_pos)
        return _limit(make("message", target.offset, name, fields))

    def fieldinits(self, children: Children) -> list[Any]:
        return children[0] if children else []

    def fieldinit(self, children: Children) -> list[Any]:
        name_tok, _colon, value = children
        return [name_tok.value, value]

    # -- aggregates ---------------------------------------------------------------------------
    def list_lit(self, children: Children) -> Node:
        elems = children[1] if len(children) > 1 and isinstance(children[1], list) else []
        return _limit(make("list", children[0].start_pos, elems))

    def map_lit(self, children: Children) -> Node:
        entries = children[1] if len(children) > 1 and isinstance(children[1], list) else []
        return _limit(make("map", children[0].start_pos, entries))

    mapinits = exprlist
    fields = exprlist

    def mapinit(self, children: Children) -> list[Any]:
        key, _colon, value = children
        return [key, value]

    # -- operators ----------------------------------------------------------------------------
    def relop(self, children: Children) -> Token:
        op: Token = children[0]
        return op

    def binary(self, children: Children) -> Node:
        left, op, right = children
        return _limit(make("call", op.start_pos, "_" + op.value + "_", None, [left, right]))

    def _chain(self, kind: str, children: Children) -> Node:
        left, op, right = children
        operands = left.args[0] + [right] if left.kind == kind else [left, right]
        # depth of a flattened chain is that of its deepest operand + 1, never its length
        return _limit(make(kind, op.start_pos if left.kind != kind else left.offset, operands))

    def logic_or(self, children: Children) -> Node:
        return self._chain("or", children)

    def logic_and(self, children: Children) -> Node:
        return self._chain("and", children)

    def ternary(self, children: Children) -> Node:
        test, q, then, other = children
        return _limit(make("cond", q.start_pos, test, then, other))

    def not_(self, children: Children) -> Node:
        *ops, operand = children
        node: Node = operand
        for op in reversed(ops):
            node = _limit(make("call", op.start_pos, "!_", None, [node]))
        return node

    def negate(self, children: Children) -> Node:
        *ops, operand = children
        node: Node = operand
        if ops and (operand.kind == "double" or (operand.kind == "int" and operand.args[0] >= 0)):
            # fold one minus into the literal so -9223372036854775808 is representable; a literal that is
            # already negative was folded before (`-(-9223372036854775808)`): negating it again is arithmetic,
            # which overflows at evaluation as CEL says, not a literal out of range
            op = ops.pop()
            if operand.kind == "int":
                node = make("int", op.start_pos, operand.args[0] * -1)
            else:
                node = make("double", op.start_pos, repr(-float(operand.args[0])))
        for op in reversed(ops):
            node = _limit(make("call", op.start_pos, "-_", None, [node]))
        return node
