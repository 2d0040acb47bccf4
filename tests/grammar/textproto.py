"""A small protobuf text-format reader for the CEL conformance files (test support only).

Parses into nested dicts: each field name maps to a list of values (repeated or not); scalars are
int/float/bytes (strings stay bytes, since text-format strings are byte strings; callers decode) or an
identifier string for enums/bools (`true`, `NULL_VALUE`). `[type.url/Name] { ... }` extension/Any names
are kept as keys with their brackets.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<bracket>\[[^\]]*\])
  | (?P<num>-?(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fF]?)
  | (?P<ident>-?[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}<>:;,])
""", re.X | re.S)

_SIMPLE = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34, "?": 63}


def unescape(body: str) -> bytes:
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e in _SIMPLE:
            out.append(_SIMPLE[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < min(i + 4, n) and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif e in "xX":
            j = i + 2
            while j < min(i + 4, n) and body[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(body[i + 2:j], 16))
            i = j
        elif e in "uU":
            width = 4 if e == "u" else 8
            out += chr(int(body[i + 2:i + 2 + width], 16)).encode("utf-8", "surrogatepass")
            i += 2 + width
        else:
            raise ValueError(f"bad escape \\{e}")
    return bytes(out)


def _tokens(text: str):
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"textproto: cannot read at {pos}: {text[pos:pos + 30]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            yield kind, m.group()


def parse(text: str) -> dict:
    toks = list(_tokens(text))
    msg, i = _message(toks, 0, None)
    return msg


def _message(toks, i, close):
    msg: dict = {}
    while i < len(toks):
        kind, val = toks[i]
        if close is not None and kind == "punct" and val == close:
            return msg, i + 1
        if kind == "punct" and val in ",;":
            i += 1
            continue
        if kind not in ("ident", "bracket"):
            raise ValueError(f"textproto: expected a field name, found {val!r}")
        name = val
        i += 1
        if toks[i] == ("punct", ":"):
            i += 1
        kind, val = toks[i]
        if kind == "punct" and val in "{<":
            sub, i = _message(toks, i + 1, "}" if val == "{" else ">")
            value = sub
        elif kind == "str":
            data = b""
            while i < len(toks) and toks[i][0] == "str":  # adjacent literals concatenate
                data += unescape(toks[i][1][1:-1])
                i += 1
            value = data
        elif kind == "num":
            i += 1
            v = val.rstrip("fF") if not val.lower().startswith(("0x", "-0x")) else val
            value = int(v, 0) if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|[0-9]+)", v) else float(v)
        elif kind == "ident":
            i += 1
            value = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan"),
                     "infinity": float("inf"), "-infinity": float("-inf")}.get(val.lower(), val)
        else:
            raise ValueError(f"textproto: unexpected {val!r} after field {name}")
        msg.setdefault(name, []).append(value)
    if close is not None:
        raise ValueError("textproto: unexpected end of input")
    return msg, i
