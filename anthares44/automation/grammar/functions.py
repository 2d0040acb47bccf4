"""The CEL standard function library over runtime values: operators, conversions, strings, size.

Every function takes already-evaluated, non-error arguments and returns a value or an `Err`; none raises
for bad input. Integer results are range-checked (int64/uint64) as CEL requires. `FUNCTIONS` maps
(name, arity, receiver-style?) lookups to implementations; see `lookup`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from . import regex
from .values import (
    E_CONVERSION,
    E_DIV_ZERO,
    E_INDEX,
    E_NO_SUCH_KEY,
    E_OVERFLOW,
    E_REGEX,
    INT64_MAX,
    INT64_MIN,
    TYPES,
    UINT64_MAX,
    CelType,
    Err,
    UInt,
    Value,
    compare,
    equals,
    map_get,
    no_overload,
    type_name,
)

MAX_STRING = 1_000_000   # characters/bytes a string or bytes result may have
MAX_LIST = 100_000       # elements a list result may have

# an implementation: evaluated, non-error arguments (one or two) -> a value or an Err
Function = Callable[..., Value]


def _int(v: int, op: str) -> int | Err:
    if INT64_MIN <= v <= INT64_MAX:
        return v
    return Err(E_OVERFLOW, f"integer overflow in {op}")


def _uint(v: int, op: str) -> UInt | Err:
    if 0 <= v <= UINT64_MAX:
        return UInt(v)
    return Err(E_OVERFLOW, f"unsigned integer overflow in {op}")


# -- arithmetic --------------------------------------------------------------------------------
def add(a: Value, b: Value) -> Value:
    ta, tb = type(a), type(b)
    if ta is not tb:
        return no_overload("_+_", a, b)
    if ta is int:
        return _int(a + b, "addition")
    if ta is UInt:
        return _uint(a + b, "addition")
    if ta is float:
        return a + b
    if ta is str or ta is bytes:
        if len(a) + len(b) > MAX_STRING:
            return Err(E_OVERFLOW, f"{type_name(a)} result longer than {MAX_STRING}")
        return a + b
    if ta is list:
        if len(a) + len(b) > MAX_LIST:
            return Err(E_OVERFLOW, f"list result longer than {MAX_LIST} elements")
        return a + b
    return no_overload("_+_", a, b)


def sub(a: Value, b: Value) -> Value:
    ta = type(a)
    if ta is not type(b):
        return no_overload("_-_", a, b)
    if ta is int:
        return _int(a - b, "subtraction")
    if ta is UInt:
        return _uint(a - b, "subtraction")
    if ta is float:
        return a - b
    return no_overload("_-_", a, b)


def mul(a: Value, b: Value) -> Value:
    ta = type(a)
    if ta is not type(b):
        return no_overload("_*_", a, b)
    if ta is int:
        return _int(a * b, "multiplication")
    if ta is UInt:
        return _uint(a * b, "multiplication")
    if ta is float:
        return a * b
    return no_overload("_*_", a, b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def div(a: Value, b: Value) -> Value:
    ta = type(a)
    if ta is not type(b):
        return no_overload("_/_", a, b)
    if ta is int or ta is UInt:
        if b == 0:
            return Err(E_DIV_ZERO, "division by zero")
        return _int(_trunc_div(a, b), "division") if ta is int else UInt(a // b)
    if ta is float:
        if b == 0.0:  # IEEE 754: CEL doubles never raise
            if a == 0.0 or a != a:
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    return no_overload("_/_", a, b)


def mod(a: Value, b: Value) -> Value:
    ta = type(a)
    if ta is not type(b) or ta not in (int, UInt):
        return no_overload("_%_", a, b)
    if b == 0:
        return Err(E_DIV_ZERO, "modulus by zero")
    if ta is UInt:
        return UInt(a % b)
    r = abs(a) % abs(b)  # C semantics: the sign follows the dividend
    return -r if a < 0 else r


def neg(a: Value) -> Value:
    ta = type(a)
    if ta is int:
        return _int(-a, "negation")
    if ta is float:
        return -a
    return no_overload("-_", a)


def not_(a: Value) -> Value:
    if type(a) is bool:
        return not a
    return no_overload("!_", a)


# -- comparison --------------------------------------------------------------------------------
def eq(a: Value, b: Value) -> Value:
    return equals(a, b)


def ne(a: Value, b: Value) -> Value:
    r = equals(a, b)
    return r if type(r) is Err else not r


def _ordering(op: str, test: Callable[[int], bool]) -> Function:
    def fn(a: Value, b: Value) -> Value:
        c = compare(a, b, op)
        if isinstance(c, Err):
            return c
        return False if c is None else test(c)
    return fn


def in_(a: Value, coll: Value) -> Value:
    tc = type(coll)
    if tc is list:
        for x in coll:
            r = equals(a, x)
            if r is True:
                return True
        return False
    if tc is dict:
        return map_get(coll, a)[0]
    return no_overload("@in", a, coll)


def index(coll: Value, key: Value) -> Value:
    tc = type(coll)
    if tc is list:
        tk = type(key)
        if tk is float:
            if not (math.isfinite(key) and key == int(key)):
                return Err(E_INDEX, f"invalid list index {key!r}")
            key = int(key)
        elif tk is not int and tk is not UInt:
            return no_overload("_[_]", coll, key)
        if 0 <= key < len(coll):
            return coll[key]
        return Err(E_INDEX, f"index out of range: {int(key)}")
    if tc is dict:
        found, v = map_get(coll, key)
        if found:
            return v
        return Err(E_NO_SUCH_KEY, f"no such key: {_show(key)}")
    return no_overload("_[_]", coll, key)


def _show(v: Value) -> str:
    if type(v) is str:
        return "'" + v.replace("'", "\\'") + "'"
    return repr(v)


# -- size and strings --------------------------------------------------------------------------
def size(v: Value) -> Value:
    if type(v) in (str, bytes, list, dict):
        return len(v)
    return no_overload("size", v)


def _strfn(name: str, test: Callable[[str, str], bool]) -> Function:
    def fn(s: Value, t: Value) -> Value:
        if type(s) is str and type(t) is str:
            return test(s, t)
        return no_overload(name, s, t)
    return fn


def matches(s: Value, pattern: Value) -> Value:
    if type(s) is not str or type(pattern) is not str:
        return no_overload("matches", s, pattern)
    try:
        return regex.matches(s, pattern)
    except regex.RegexRejected as exc:
        return Err(E_REGEX, str(exc))


# -- conversions -------------------------------------------------------------------------------
_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")
_UINT_TEXT = re.compile(r"\+?[0-9]+\Z")
_FLOAT_TEXT = re.compile(r"[+-]?(inf(inity)?|nan|([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?)\Z", re.I)
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def to_int(v: Value) -> Value:
    t = type(v)
    if t is int:
        return v
    if t is UInt:
        return _int(int(v), "int() conversion")
    if t is float:
        # the valid range is open at both ends in double space: -2^63 itself rounds onto the boundary
        if not math.isfinite(v) or not (-9.223372036854775808e18 < v < 9.223372036854775807e18):
            return Err(E_OVERFLOW, "double out of int range in int() conversion")
        return int(v)
    if t is str:
        if not _INT_TEXT.match(v):
            return Err(E_CONVERSION, f"cannot convert string {_show(v)} to int")
        return _int(int(v), "int() conversion")
    return no_overload("int", v)


def to_uint(v: Value) -> Value:
    t = type(v)
    if t is UInt:
        return v
    if t is int:
        return _uint(v, "uint() conversion")
    if t is float:
        if not math.isfinite(v) or not (-1.0 < v < 1.8446744073709552e19):
            return Err(E_OVERFLOW, "double out of uint range in uint() conversion")
        return UInt(int(v))
    if t is str:
        if not _UINT_TEXT.match(v):
            return Err(E_CONVERSION, f"cannot convert string {_show(v)} to uint")
        return _uint(int(v), "uint() conversion")
    return no_overload("uint", v)


def to_double(v: Value) -> Value:
    t = type(v)
    if t is float:
        return v
    if t is int or t is UInt:
        return float(v)
    if t is str:
        if not _FLOAT_TEXT.match(v):
            return Err(E_CONVERSION, f"cannot convert string {_show(v)} to double")
        return float(v)
    return no_overload("double", v)


def format_double(v: float) -> str:
    """Shortest repr that round-trips, spelled as CEL implementations print doubles."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    text = repr(v)
    return text.replace("e+", "e+").replace("e-0", "e-")


def to_string(v: Value) -> Value:
    t = type(v)
    if t is str:
        return v
    if t is bool:
        return "true" if v else "false"
    if t is int or t is UInt:
        return str(int(v))
    if t is float:
        return format_double(v)
    if t is bytes:
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return Err(E_CONVERSION, "bytes are not valid UTF-8")
    if t is CelType:
        return v.name
    return no_overload("string", v)


def to_bytes(v: Value) -> Value:
    t = type(v)
    if t is bytes:
        return v
    if t is str:
        return v.encode("utf-8", "surrogatepass")
    return no_overload("bytes", v)


def to_bool(v: Value) -> Value:
    t = type(v)
    if t is bool:
        return v
    if t is str:
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        return Err(E_CONVERSION, f"cannot convert string {_show(v)} to bool")
    return no_overload("bool", v)


def type_of(v: Value) -> Value:
    name = type_name(v)
    if name == "unsupported":
        return no_overload("type", v)
    return TYPES[name]


def dyn(v: Value) -> Value:
    return v


# name -> (global arity -> fn, receiver arity (including the receiver) -> fn)
_G, _R = "global", "receiver"
FUNCTIONS: dict[tuple[str, str, int], Function] = {}


def _reg(name: str, fn: Function, arity: int, *styles: str) -> None:
    for style in styles or (_G,):
        FUNCTIONS[(name, style, arity)] = fn


_fn: Function
for _name, _fn in (("_+_", add), ("_-_", sub), ("_*_", mul), ("_/_", div), ("_%_", mod),
                   ("_==_", eq), ("_!=_", ne), ("_in_", in_), ("_[_]", index),
                   ("_<_", _ordering("_<_", lambda c: c < 0)), ("_<=_", _ordering("_<=_", lambda c: c <= 0)),
                   ("_>_", _ordering("_>_", lambda c: c > 0)), ("_>=_", _ordering("_>=_", lambda c: c >= 0))):
    _reg(_name, _fn, 2)
_reg("-_", neg, 1)
_reg("!_", not_, 1)
_reg("size", size, 1, _G, _R)
_reg("matches", matches, 2, _G, _R)
_reg("contains", _strfn("contains", lambda s, t: t in s), 2, _R)
_reg("startsWith", _strfn("startsWith", lambda s, t: s.startswith(t)), 2, _R)
_reg("endsWith", _strfn("endsWith", lambda s, t: s.endswith(t)), 2, _R)
for _name, _fn in (("int", to_int), ("uint", to_uint), ("double", to_double), ("string", to_string),
                   ("bytes", to_bytes), ("bool", to_bool), ("type", type_of), ("dyn", dyn)):
    _reg(_name, _fn, 1)

KNOWN_NAMES = frozenset(name for name, _, _ in FUNCTIONS)


def lookup(name: str, receiver: bool, arity: int) -> Function | None:
    """The implementation for a call, or None. `arity` counts the receiver for receiver-style calls."""
    return FUNCTIONS.get((name, _R if receiver else _G, arity))
