"""Decoding of CEL literal tokens (strings, bytes, numbers) into values.

Kept apart from the parser because the escape rules are the fiddly part of the lexical grammar:
CEL strings accept \\a \\b \\f \\n \\r \\t \\v \\\\ \\? \\" \\' \\` , octal \\ooo, \\xHH/\\XHH, \\uHHHH and \\UHHHHHHHH;
bytes literals take octal/hex escapes as raw byte values while other characters are UTF-8 encoded.
"""

from __future__ import annotations

from .values import INT64_MAX, INT64_MIN, UINT64_MAX, UInt

_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
           "\\": "\\", "?": "?", '"': '"', "'": "'", "`": "`"}
_HEX = "0123456789abcdefABCDEF"


class LiteralError(ValueError):
    """A malformed literal; `pos` is the offset inside the token."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def decode_string_token(tok: str) -> tuple[str | bytes, int]:
    """Decode a STRING/RSTRING token (with prefix and quotes). Returns (value, body offset in token)."""
    i = 0
    raw = is_bytes = False
    while tok[i] not in "'\"":
        if tok[i] in "rR":
            raw = True
        else:
            is_bytes = True
        i += 1
    q = 3 if tok[i:i + 3] in ('"""', "'''") else 1
    body = tok[i + q:len(tok) - q]
    start = i + q
    if raw:
        return (body.encode("utf-8") if is_bytes else body), start
    return _unescape(body, is_bytes, start), start


def _unescape(body: str, is_bytes: bool, base: int) -> str | bytes:
    raw = bytearray()        # a bytes literal's bytes
    chars: list[str] = []    # a string literal's characters
    n, i = len(body), 0

    def put_char(ch: str) -> None:
        if is_bytes:
            raw.extend(ch.encode("utf-8", "surrogatepass"))
        else:
            chars.append(ch)

    while i < n:
        c = body[i]
        if c != "\\":
            put_char(c)
            i += 1
            continue
        if i + 1 >= n:
            raise LiteralError("dangling backslash in string literal", base + i)
        e = body[i + 1]
        if e in _SIMPLE:
            put_char(_SIMPLE[e])
            i += 2
        elif e in "01234567":
            digits = body[i + 1:i + 4]
            if len(digits) < 3 or any(d not in "01234567" for d in digits):
                raise LiteralError("octal escape needs three digits (\\ooo)", base + i)
            code = int(digits, 8)
            if code > 255:
                raise LiteralError("octal escape out of range", base + i)
            if is_bytes:
                raw.append(code)
            else:
                chars.append(chr(code))
            i += 4
        elif e in "xXuU":
            width = 2 if e in "xX" else (4 if e == "u" else 8)
            digits = body[i + 2:i + 2 + width]
            if len(digits) < width or any(d not in _HEX for d in digits):
                raise LiteralError(f"\\{e} escape needs {width} hex digits", base + i)
            code = int(digits, 16)
            if is_bytes and e in "xX":
                raw.append(code)
            else:
                if is_bytes and e in "uU":
                    raise LiteralError("unicode escapes are not allowed in bytes literals", base + i)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise LiteralError("invalid unicode code point in escape", base + i)
                put_char(chr(code))
            i += 2 + width
        else:
            raise LiteralError(f"invalid escape sequence '\\{e}'", base + i)
    return bytes(raw) if is_bytes else "".join(chars)


def decode_int(tok: str) -> int:
    """INT token (decimal or hex) to int; range is checked by the caller (negation folds first)."""
    return int(tok, 16) if tok[:2] in ("0x", "0X") else int(tok, 10)


def decode_uint(tok: str) -> UInt:
    v = decode_int(tok[:-1])
    if v > UINT64_MAX:
        raise LiteralError("uint literal out of range", 0)
    return UInt(v)


def check_int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise LiteralError("int literal out of range", 0)
    return v
