"""The CEL syntax tree: one small node type, its limits, and its JSON (IR) form.

A node is (kind, offset, args). `offset` is the 0-based character offset in the expression text that
diagnostics and evaluation errors point at (the operator for binary operations, the name for calls).
Kinds and their args:
  int/uint [value]   double [repr]   string [text]   bytes [hex]   bool [value]   null []
  ident [name]                         select [operand, field]         has [operand, field]
  index [operand, index]               call [name, target|None, [args]]
  list [[elems]]   map [[[key, value], ...]]   message [type name, [[field, value], ...]]
  and [[operands]] or [[operands]]     cond [test, then, else]
  comp [macro, range, var, var2|None, [args]]   (all, exists, exists_one, map, filter)
`&&`/`||` chains are flattened to one n-ary node: their evaluation is commutative anyway, and a long chain
must not cost nesting depth.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100          # nesting depth accepted at compile time (CEL requires >= 32)
MAX_NODES = 5_000        # nodes in one expression
MAX_TEXT = 20_000        # characters in one expression


class Node:
    __slots__ = ("kind", "offset", "args", "depth", "size")

    def __init__(self, kind: str, offset: int, args: list[Any], depth: int = 1, size: int = 1) -> None:
        self.kind = kind
        self.offset = offset
        self.args = args
        self.depth = depth
        self.size = size

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Node({self.kind!r}, {self.offset}, {self.args!r})"

    def children(self) -> list[Node]:
        out: list[Node] = []
        for a in self.args:
            _collect(a, out)
        return out


def _collect(a: Any, out: list[Node]) -> None:
    if isinstance(a, Node):
        out.append(a)
    elif isinstance(a, list):
        for x in a:
            _collect(x, out)


def make(kind: str, offset: int, *args: Any) -> Node:
    """Build a node and keep its depth/size so limits are checked without walking (or recursing)."""
    kids: list[Node] = []
    for a in args:
        _collect(a, kids)
    depth = 1 + max((k.depth for k in kids), default=0)
    size = 1 + sum(k.size for k in kids)
    return Node(kind, offset, list(args), depth, size)


def to_json(node: Node) -> dict[str, Any]:
    """JSON-serialisable form: {"k": kind, "o": offset, "a": [...]}, nested nodes as dicts."""
    return {"k": node.kind, "o": node.offset, "a": [_arg_json(a) for a in node.args]}


def _arg_json(a: Any) -> Any:
    if isinstance(a, Node):
        return to_json(a)
    if isinstance(a, list):
        return [_arg_json(x) for x in a]
    return a


def from_json(data: Any) -> Node:
    """Inverse of `to_json`; raises ValueError on anything malformed (depth is bounded by MAX_DEPTH)."""
    return _from_json(data, 0)


def _from_json(data: Any, depth: int) -> Node:
    if depth > MAX_DEPTH * 2 or not isinstance(data, dict):
        raise ValueError("malformed expression IR")
    kind, off, args = data.get("k"), data.get("o"), data.get("a")
    if not isinstance(kind, str) or not isinstance(off, int) or not isinstance(args, list):
        raise ValueError("malformed expression IR node")
    return make(kind, off, *[_arg_from(a, depth + 1) for a in args])


def _arg_from(a: Any, depth: int) -> Any:
    if isinstance(a, dict):
        return _from_json(a, depth)
    if isinstance(a, list):
        return [_arg_from(x, depth + 1) for x in a]
    return a
