"""Model validation with diagnostics: runs a pydantic model over YAML data and maps every error back to the
YAML position of the offending node, with a stable code and, for unknown keys and values, a did-you-mean hint.

pydantic never reaches the user: its error types are translated here, its messages rewritten where they
would talk about Python ("Input should be a valid integer" -> "expected an integer, got a string").
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..diagnostics import Diagnostic, register
from ..suggestions import closest
from .source import Path, SourceFile

A44100 = register("A44100", "value has the wrong shape")
A44101 = register("A44101", "unknown key")
A44102 = register("A44102", "required key missing")
A44103 = register("A44103", "value has the wrong type")
A44104 = register("A44104", "value is not one of the allowed values")
A44105 = register("A44105", "invalid duration")
A44106 = register("A44106", "invalid cron expression")
A44107 = register("A44107", "unknown time zone")
A44108 = register("A44108", "invalid version")
A44109 = register("A44109", "number out of range")
A44110 = register("A44110", "identifier has an invalid format")
# Owned by the trigger rules' range, registered here because the model reports the missing key first.
A44600 = register("A44600", "schedule trigger without a time zone")

_CUSTOM = {"a44_duration": A44105, "a44_cron": A44106, "a44_tz": A44107, "a44_version": A44108}
_TYPE_NAMES = {
    "int_type": "an integer", "int_parsing": "an integer", "string_type": "a string", "bool_type": "true or false",
    "bool_parsing": "true or false", "float_type": "a number", "float_parsing": "a number", "dict_type": "a mapping",
    "list_type": "a list", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "int_from_float": "an integer", "finite_number": "a finite number",
}


def yaml_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def did_you_mean(word: str, candidates: Collection[str]) -> str | None:
    close = closest(word, candidates, 0.6)
    return f"did you mean {close!r}?" if close else None


def model_keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def validate(src: SourceFile, model: type[BaseModel], data: Any,
             base: Path = ()) -> tuple[BaseModel | None, list[Diagnostic]]:
    """Validate `data` (found at path `base` in `src`) against `model`; returns (instance or None, diagnostics)."""
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        diags = [_diagnostic(src, model, data, base, err) for err in exc.errors(include_url=False)]
        return None, _merge_type_errors(diags)


def error_paths(model: type[BaseModel], data: Any) -> list[tuple[Path, str]] | None:
    """Where `data` fails `model`: (path in the data, pydantic error type) per error; None when it validates."""
    try:
        model.model_validate(data)
        return None
    except ValidationError as exc:
        return [(_data_path(data, tuple(e.get("loc", ())))[0], e.get("type", ""))
                for e in exc.errors(include_url=False)]


def _merge_type_errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    """A union field (`compensate: str | mapping`) fails once per member: say it once, with every option."""
    out: list[Diagnostic] = []
    seen: dict[tuple[Any, ...], int] = {}
    for d in diags:
        key = (d.code, d.line, d.col)
        if d.code != A44103 or key not in seen:
            seen.setdefault(key, len(out))
            out.append(d)
            continue
        first = out[seen[key]]
        head, _, got = first.message.rpartition(", got ")
        extra = d.message.rpartition(", got ")[0].rpartition("expected ")[2]
        out[seen[key]] = Diagnostic(first.code, first.severity, f"{head} or {extra}, got {got}", first.file,
                                    first.line, first.col, first.end_line, first.end_col, first.hint)
    return out


def path_text(path: Path) -> str:
    """`("steps", 0, "compensate")` -> `steps[0].compensate`."""
    text = ""
    for p in path:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text or "document"


def _data_path(data: Any, loc: tuple[str | int, ...]) -> tuple[Path, Any, Any]:
    """Follow pydantic's loc through the data, dropping union-member tags that are not keys of the data.
    Returns (path, parent value, value)."""
    path: list[str | int] = []
    parent: Any = None
    cur = data
    for part in loc:
        if isinstance(cur, dict) and isinstance(part, str) and part in cur:
            parent, cur = cur, cur[part]
            path.append(part)
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            parent, cur = cur, cur[part]
            path.append(part)
        elif isinstance(cur, dict) and isinstance(part, str) and not path_is_tag(part):
            # a missing or extra key below an existing mapping: keep it so the caller can name it
            path.append(part)
            parent, cur = cur, None
            break
    return tuple(path), parent, cur


def path_is_tag(part: str) -> bool:
    # pydantic names union members like 'str', 'Compensation', 'function-after[...]', 'literal[...]'
    return part[:1].isupper() or "[" in part or part in {"str", "int", "float", "bool", "list", "dict", "none"}


def _model_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class that owns the last key of `loc` (for did-you-mean over its fields)."""
    import typing

    cur: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if not (isinstance(cur, type) and issubclass(cur, BaseModel)):
            return None
        field = next((f for n, f in cur.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        ann = field.annotation
        found = None
        stack = [ann]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                found = t
                break
            stack.extend(typing.get_args(t))
        cur = found
    return cur if isinstance(cur, type) and issubclass(cur, BaseModel) else None


def _diagnostic(src: SourceFile, model: type[BaseModel], data: Any, base: Path, err: ErrorDetails) -> Diagnostic:
    loc = tuple(err.get("loc", ()))
    etype = err.get("type", "")
    path, parent, value = _data_path(data, loc)
    full = base + path
    ctx = err.get("ctx") or {}
    where = path_text(path)
    if etype == "extra_forbidden":
        key = str(path[-1]) if path else "?"
        owner = _model_at(model, path)
        hint = did_you_mean(key, model_keys(owner)) if owner else None
        allowed = ", ".join(model_keys(owner)) if owner else ""
        msg = f"unknown key {key!r}" + (f"; expected one of: {allowed}" if allowed and not hint else "")
        return Diagnostic.at(A44101, msg, src.path, src.span(full, key=True), hint=hint)
    if etype == "missing":
        key = str(path[-1]) if path else "?"
        parent_path = full[:-1]
        if key == "tz" and isinstance(parent, dict) and "cron" in parent:
            return Diagnostic.at(A44600, "schedule trigger has no 'tz'; the cron is read in local time of a "
                                         "mandatory IANA zone", src.path, src.span(parent_path, key=True),
                                 hint="add e.g. `tz: America/Sao_Paulo`; assuming UTC shifts runs by an hour "
                                      "twice a year where clocks change")
        return Diagnostic.at(A44102, f"missing required key {key!r}" +
                             (f" in {path_text(path[:-1])}" if len(path) > 1 else ""),
                             src.path, src.span(parent_path, key=True) if parent_path else src.span(()))
    if etype in _CUSTOM:
        return Diagnostic.at(_CUSTOM[etype], f"{where}: {err['msg']}", src.path, src.span(full))
    if etype in ("literal_error", "enum"):
        expected = ctx.get("expected", "")
        options = [o.strip().strip("'\"") for o in expected.replace(" or ", ",").split(",") if o.strip()]
        hint = did_you_mean(str(value), options) if isinstance(value, str) else None
        return Diagnostic.at(A44104, f"{where}: {value!r} is not allowed; expected {expected}",
                             src.path, src.span(full), hint=hint)
    if etype in _TYPE_NAMES:
        return Diagnostic.at(A44103, f"{where}: expected {_TYPE_NAMES[etype]}, got {yaml_type(value)}",
                             src.path, src.span(full))
    if etype in ("greater_than_equal", "greater_than", "less_than_equal", "less_than",
                 "too_short", "too_long"):
        return Diagnostic.at(A44109, f"{where}: {_range_text(etype, ctx, value)}", src.path, src.span(full))
    if etype == "string_pattern_mismatch":
        return Diagnostic.at(A44110, f"{where}: {value!r} does not match the required format "
                                     f"{ctx.get('pattern', '')}", src.path, src.span(full),
                             hint=_pattern_hint(path))
    return Diagnostic.at(A44100, f"{where}: {err.get('msg', 'invalid value')}", src.path, src.span(full))


def _range_text(etype: str, ctx: dict[str, Any], value: Any) -> str:
    if etype == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)"
    if etype == "too_long":
        return f"allows at most {ctx.get('max_length')} item(s)"
    bound = {"greater_than_equal": ">= {ge}", "greater_than": "> {gt}", "less_than_equal": "<= {le}",
             "less_than": "< {lt}"}[etype].format(**{k: ctx.get(k) for k in ("ge", "gt", "le", "lt")})
    return f"{value!r} is out of range; it must be {bound}"


def _pattern_hint(path: Path) -> str | None:
    last = path[-1] if path else ""
    if last == "name":
        return "lowercase letters, digits and '-', starting with a letter, e.g. invoice-settle"
    if last in ("id", "needs") or isinstance(last, int):
        return "a letter followed by letters, digits, '_' or '-'"
    return None
