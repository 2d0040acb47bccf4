"""`matches()` on RE2 (google-re2): RE2 syntax and linear-time matching, as the CEL specification requires.

RE2 refuses what it cannot match in linear time (backreferences, lookaround, atomic groups, possessive
quantifiers, conditionals); its terse parse errors are reworded for workflow authors. Patterns are capped
in length and compiled with a memory cap (`max_mem`), so neither compiling nor matching can run away.
`re2` is imported on first use: lint of a workflow without `matches` never loads it. Compiled patterns are
cached (bounded).
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

MAX_PATTERN = 1_000
MAX_INPUT = 1_000_000          # the longest string CEL can build (functions.MAX_STRING)
MAX_MEM = 8 << 20              # bytes RE2 may use for one compiled pattern
_CACHE_SIZE = 256

# a compiled RE2 pattern and RE2 options: google-re2 ships no types
Pattern: TypeAlias = Any

_cache: dict[str, Pattern | str] = {}
_options: Any = None
# RE2 says "invalid perl operator: (?=" for all of these; the author gets told which feature it is
_EXPLAINED = [
    (re.compile(r"\\[1-9]|\(\?P="), "backreferences are not supported (RE2 syntax)"),
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions are not supported (RE2 syntax)"),
    (re.compile(r"\(\?>"), "atomic groups are not supported (RE2 syntax)"),
    (re.compile(r"\(\?\("), "conditional groups are not supported (RE2 syntax)"),
    (re.compile(r"(?<!\\)[*+?}]\+"), "possessive quantifiers are not supported (RE2 syntax)"),
    (re.compile(r"\\Z"), "\\Z is not RE2 syntax: use \\z or $"),
]


class RegexRejected(ValueError):
    pass


def _re2() -> tuple[Any, Any]:
    global _options
    import re2

    if _options is None:
        opts = re2.Options()
        opts.log_errors = False      # RE2 would print every rejected pattern to stderr
        opts.never_capture = True    # matches() is a yes/no question: no submatch bookkeeping
        opts.max_mem = MAX_MEM
        _options = opts
    return re2, _options


def compile_pattern(pattern: str) -> Pattern:
    """The compiled RE2 pattern, or RegexRejected with a user-facing reason."""
    hit = _cache.get(pattern)
    if hit is None:
        hit = _build(pattern)
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()  # simple and thread-safe enough: a full cache just starts over
        _cache[pattern] = hit
    if isinstance(hit, str):
        raise RegexRejected(hit)
    return hit


def _build(pattern: str) -> Pattern | str:
    """A compiled pattern, or the reason (a str) it is refused."""
    if len(pattern) > MAX_PATTERN:
        return f"pattern longer than {MAX_PATTERN} characters"
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)
    except UnicodeEncodeError:
        return "pattern is not valid Unicode (a lone surrogate)"
    except re2.error as exc:
        for rx, reason in _EXPLAINED:
            if rx.search(pattern):
                return reason
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"invalid regular expression (RE2 syntax): {detail}"


def problem(pattern: str) -> str | None:
    """Why `pattern` cannot be used by matches(), or None (the checker's compile-time diagnostic)."""
    try:
        compile_pattern(pattern)
    except RegexRejected as exc:
        return str(exc)
    return None


def matches(text: str, pattern: str) -> bool:
    """Unanchored search, as CEL's matches() (RE2 partial match). Raises RegexRejected."""
    compiled = compile_pattern(pattern)
    if len(text) > MAX_INPUT:
        raise RegexRejected(f"input longer than {MAX_INPUT} characters")
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:
        raise RegexRejected("input is not valid Unicode (a lone surrogate)") from None
