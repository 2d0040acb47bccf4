"""CEL runtime values on top of plain JSON-like Python values, and the value-level rules.

Plain values: None (null), bool, int (CEL int, int64 range), float (double), str, list, dict.
CEL-only types added here: `UInt` (uint64), bytes, `CelType` (type values) and `Err` (an error *value*:
errors flow through evaluation as data so `&&`, `||`, `?:` and the macros can absorb them as CEL demands).
Also here: type names, CEL equality (heterogeneous numeric equality, deep list/map equality) and ordering.
Nothing here ever touches attributes of arbitrary Python objects: foreign objects are just "unsupported".
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

# A CEL value at run time: None, bool, int, UInt, float, str, bytes, list, dict, CelType or Err. The rules below
# dispatch on `type(v) is ...` held in locals, which mypy does not narrow through: one name for "any of those".
Value: TypeAlias = Any

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
UINT64_MAX = 2 ** 64 - 1

# Evaluation error codes (the runtime maps all of them to its E_EXPR_EVAL).
E_NO_SUCH_KEY = "E_EXPR_NO_SUCH_KEY"
E_TYPE = "E_EXPR_TYPE"
E_DIV_ZERO = "E_EXPR_DIV_ZERO"
E_OVERFLOW = "E_EXPR_OVERFLOW"
E_COST = "E_EXPR_COST"
E_NO_SUCH_OVERLOAD = "E_EXPR_NO_SUCH_OVERLOAD"
E_INDEX = "E_EXPR_INDEX"
E_UNKNOWN_IDENT = "E_EXPR_UNKNOWN_IDENT"
E_CONVERSION = "E_EXPR_CONVERSION"
E_REGEX = "E_EXPR_REGEX"
E_UNSUPPORTED = "E_EXPR_UNSUPPORTED"
E_DUPLICATE_KEY = "E_EXPR_DUPLICATE_KEY"
E_DEPTH = "E_EXPR_DEPTH"
EVAL_CODES = (E_NO_SUCH_KEY, E_TYPE, E_DIV_ZERO, E_OVERFLOW, E_COST, E_NO_SUCH_OVERLOAD, E_INDEX,
              E_UNKNOWN_IDENT, E_CONVERSION, E_REGEX, E_UNSUPPORTED, E_DUPLICATE_KEY, E_DEPTH)


class UInt(int):
    """CEL uint. An int subclass so it hashes/compares like the same number (cross-type map keys),
    but every operator checks `type(x) is UInt` so it never mixes silently with int."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A CEL type value (`int`, `list`, `type`...). Compared by name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("CelType", self.name))

    def __repr__(self) -> str:
        return self.name


class Err:
    """An error value. Not an exception: it is returned, propagated by strict functions, absorbed by
    the logical operators. `offset` points into the expression text."""

    __slots__ = ("code", "message", "offset")

    def __init__(self, code: str, message: str, offset: int = -1) -> None:
        self.code, self.message, self.offset = code, message, offset

    def __repr__(self) -> str:
        return f"Err({self.code}, {self.message!r})"


class CostExceeded(Exception):
    """Raised (never returned) when the evaluation budget is spent: it must not be absorbed by `||`."""


TYPE_NAMES = ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type")
TYPES = {n: CelType(n) for n in TYPE_NAMES}


def type_name(v: object) -> str:
    t = type(v)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is UInt:
        return "uint"
    if t is float:
        return "double"
    if t is str:
        return "string"
    if t is bytes:
        return "bytes"
    if t is list or t is tuple:
        return "list"
    if t is dict:
        return "map"
    if v is None:
        return "null_type"
    if t is CelType:
        return "type"
    return "unsupported"


def is_num(v: object) -> bool:
    t = type(v)
    return t is int or t is float or t is UInt


def no_overload(fn: str, *args: object, offset: int = -1) -> Err:
    sig = ", ".join(type_name(a) for a in args)
    return Err(E_NO_SUCH_OVERLOAD, f"no such overload: {fn}({sig})", offset)


def num_cmp(a: Value, b: Value) -> int | None:
    """Compare two numbers of any CEL numeric type by value. Returns -1/0/1, or None if unordered (NaN).
    Like CEL implementations, an int/uint meeting a double is compared as a double (so 2^63-1 equals
    9223372036854775808.0, the double it rounds to); int against uint compares exactly."""
    if type(a) is float or type(b) is float:
        a, b = float(a), float(b)
        if a != a or b != b:
            return None
    return int(a > b) - int(a < b)


def equals(a: Value, b: Value) -> bool | Err:
    """CEL `==`: heterogeneous numeric equality; deep for lists/maps; different types are unequal."""
    ta, tb = type(a), type(b)
    if type(a) is Err:
        return a
    if type(b) is Err:
        return b
    if is_num(a) and is_num(b):
        return num_cmp(a, b) == 0
    if ta is tuple:
        a, ta = list(a), list
    if tb is tuple:
        b, tb = list(b), list
    if ta is not tb:
        return False
    if ta is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            r = equals(x, y)
            if r is not True:
                return r
        return True
    if ta is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            found, bv = map_get(b, k)
            if not found:
                return False
            r = equals(v, bv)
            if r is not True:
                return r
        return True
    if ta is float:
        return bool(a == b)
    return bool(a == b)


def compare(a: Value, b: Value, op: str) -> int | None | Err:
    """Ordering for `<` and friends. Returns -1/0/1, None if unordered (NaN) or an Err."""
    if is_num(a) and is_num(b):
        return num_cmp(a, b)
    ta = type(a)
    if ta is type(b) and ta in (str, bytes, bool):
        return int(a > b) - int(a < b)
    return no_overload(op, a, b)


def valid_key(k: object) -> bool:
    return type(k) in (str, int, UInt, bool)


def map_get(m: dict[Any, Value], key: Value) -> tuple[bool, Value]:
    """Key lookup with CEL semantics: numeric keys match across int/uint/double by value, bool only
    matches bool (Python would let True find key 1), nothing else matches across types."""
    tk = type(key)
    if tk is float:
        if not math.isfinite(key) or key != int(key):
            return False, None
        key, tk = int(key), int
    if tk not in (str, int, UInt, bool) or key not in m:
        return False, None
    if tk is not str and key in (0, 1) and (tk is bool) != _stored_key_is_bool(m, key):
        return False, None
    return True, m[key]


def _stored_key_is_bool(m: dict[Any, Value], key: object) -> bool:
    # A dict keeps the first key object inserted for equal keys; find it (only ever for 0/1/False/True).
    for sk in m:
        if type(sk) is not str and sk == key:
            return type(sk) is bool
    return False
