"""`matches()` with RE2-like guarantees on top of Python's backtracking `re`.

CEL specifies RE2 syntax and linear-time matching. Python's `re` has neither guarantee, so patterns are
screened before use: features RE2 lacks (backreferences, lookaround, atomic groups, possessive
quantifiers, conditionals) are rejected, and so are nested unbounded quantifiers such as `(a+)+` or
`(a|aa)*`-style repeated alternations over long inputs, the shapes behind catastrophic backtracking.
Inputs and patterns are length-capped. Compiled patterns are cached (bounded).
"""

from __future__ import annotations

import re

try:  # Python 3.11+: the pattern parser re uses; only used to inspect structure, never to match
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
    from re import _constants as _sre_const  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as _sre_const  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

MAX_PATTERN = 1_000
MAX_INPUT = 100_000
MAX_INPUT_WITH_REPEATED_ALTERNATION = 2_000
_CACHE_SIZE = 256

_cache: dict[str, tuple[re.Pattern | None, str | None, bool]] = {}
_FORBIDDEN = [
    (re.compile(r"\\[1-9]|\(\?P="), "backreferences are not supported (RE2 syntax)"),
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions are not supported (RE2 syntax)"),
    (re.compile(r"\(\?>"), "atomic groups are not supported (RE2 syntax)"),
    (re.compile(r"\(\?\("), "conditional groups are not supported (RE2 syntax)"),
    (re.compile(r"(?<!\\)[*+?}]\+"), "possessive quantifiers are not supported (RE2 syntax)"),
]
_REPEATS = (_sre_const.MAX_REPEAT, _sre_const.MIN_REPEAT)


class RegexRejected(ValueError):
    pass


def compile_pattern(pattern: str) -> tuple[re.Pattern, bool]:
    """Return (compiled, has_repeated_alternation) or raise RegexRejected with a user-facing reason."""
    hit = _cache.get(pattern)
    if hit is None:
        hit = _build(pattern)
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()  # simple and thread-safe enough: a full cache just starts over
        _cache[pattern] = hit
    compiled, reason, alt = hit
    if compiled is None:
        raise RegexRejected(reason)
    return compiled, alt


def _build(pattern: str):
    if len(pattern) > MAX_PATTERN:
        return None, f"pattern longer than {MAX_PATTERN} characters", False
    for rx, reason in _FORBIDDEN:
        if rx.search(pattern):
            return None, reason, False
    try:
        parsed = _sre_parse.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return None, f"invalid regular expression: {exc}", False
    try:
        bad, alt = _scan(parsed, inside_repeat=False)
    except RecursionError:
        return None, "regular expression nests too deeply", False
    if bad:
        return None, "nested quantifiers (such as (a+)+) are not allowed: they can take exponential time", False
    return compiled, None, alt


def _scan(items, inside_repeat: bool) -> tuple[bool, bool]:
    """Walk the parsed pattern. Returns (nested_unbounded_repeat, repeated_alternation)."""
    alt = False
    for op, av in items:
        if op in _REPEATS:
            lo, hi, body = av
            unbounded_or_big = hi is _sre_const.MAXREPEAT or hi > 1
            if inside_repeat and unbounded_or_big:
                return True, alt
            b, a = _scan(body, inside_repeat or unbounded_or_big)
            if b:
                return True, alt
            alt = alt or a or (unbounded_or_big and _has_branch(body))
        elif op is _sre_const.SUBPATTERN:
            b, a = _scan(av[-1], inside_repeat)
            if b:
                return True, alt
            alt = alt or a
        elif op is _sre_const.BRANCH:
            for branch in av[1]:
                b, a = _scan(branch, inside_repeat)
                if b:
                    return True, alt
                alt = alt or a
    return False, alt


def _has_branch(items) -> bool:
    for op, av in items:
        if op is _sre_const.BRANCH:
            return True
        if op is _sre_const.SUBPATTERN and _has_branch(av[-1]):
            return True
    return False


def matches(text: str, pattern: str) -> bool:
    """Unanchored search, as CEL's matches() (RE2 partial match). Raises RegexRejected."""
    compiled, alt = compile_pattern(pattern)
    limit = MAX_INPUT_WITH_REPEATED_ALTERNATION if alt else MAX_INPUT
    if len(text) > limit:
        raise RegexRejected(f"input longer than {limit} characters for this pattern")
    return compiled.search(text) is not None
