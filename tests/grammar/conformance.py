"""Runs the official CEL conformance cases (cel-spec `simple` test data) against our implementation.

Test support only: converts textproto `cel.expr.Value`s to our runtime values, decides skips (only for
features declared out of scope in SKIP_REASONS) and compares results with CEL's typed equality.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from anthares44.automation.grammar.api import compile_expression, compile_unchecked
from anthares44.automation.grammar.values import CelType, Err, UInt

from . import textproto

# Skips return one of the reason keys of test_conformance.SKIP_REASONS (the table of out-of-scope features).
_PROTO_RX = re.compile(r"TestAllTypes|NestedTestAllTypes|google\.protobuf|\bproto[23]\b|GlobalEnum|"
                       r"\bNestedEnum\b|TestRequired|\.Any\b")
_TIME_RX = re.compile(r"\b(timestamp|duration|getFullYear|getMonth|getDate|getHours|getMinutes|"
                      r"getSeconds|getMilliseconds|getDayOf\w+)\s*\(")


def conformance_dir() -> Path | None:
    env = os.environ.get("A44_CEL_CONFORMANCE_DIR")
    if env:
        p = Path(env)
        return p if p.is_dir() else None
    # vendored with its licence and origin (tests/data/cel-conformance/ORIGIN.md): a clone runs it on its own
    p = Path(__file__).resolve().parents[1] / "data" / "cel-conformance"
    return p if p.is_dir() else None


class _Unsupported(Exception):
    pass


def to_value(v: dict):
    """cel.expr.Value (as parsed dict) -> runtime value."""
    (kind, vals), = v.items() if v else (("null_value", ["NULL_VALUE"]),)
    x = vals[0]
    if kind == "int64_value":
        return int(x)
    if kind == "uint64_value":
        return UInt(int(x))
    if kind == "double_value":
        return float(x)
    if kind == "string_value":
        return x.decode("utf-8", "surrogatepass")
    if kind == "bytes_value":
        return x
    if kind == "bool_value":
        return x == "true" or x is True
    if kind == "null_value":
        return None
    if kind == "list_value":
        return [to_value(e) for e in x.get("values", [])]
    if kind == "map_value":
        return {to_value(e["key"][0]): to_value(e["value"][0]) for e in x.get("entries", [])}
    if kind == "type_value":
        return CelType(x.decode())
    raise _Unsupported(kind)


def same(a, b) -> bool:
    """Typed equality for expected-vs-actual (1 and 1u and 1.0 are all different here)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            match = [bk for bk in b if type(bk) is type(k) and bk == k]
            if not match or not same(v, b[match[0]]):
                return False
        return True
    return a == b


@dataclass
class Case:
    file: str
    section: str
    name: str
    expr: str
    raw: dict = field(repr=False)

    @property
    def id(self) -> str:
        return f"{self.file}/{self.section}/{self.name}"

    def skip_reason(self) -> str | None:
        r = self.raw
        text = repr(r)
        if "object_value" in text or _PROTO_RX.search(self.expr) or r.get("container") \
                or "message_type" in text or "enum_value" in text:
            return "proto"
        if _TIME_RX.search(self.expr) or "timestamp_value" in text or "duration_value" in text \
                or "google.protobuf.Timestamp" in text:
            return "time"
        if "unknown" in r or "any_unknowns" in r:
            return "unknowns"
        if r.get("check_only") == ["true"] or "typed_result" in r:
            return "check_only"
        return None

    def run(self) -> tuple[bool, str]:
        """Returns (passed, detail)."""
        r = self.raw
        try:
            bindings = {b["key"][0].decode(): to_value(b["value"][0]["value"][0]) for b in r.get("bindings", [])}
            expected = to_value(r["value"][0]) if "value" in r else None
        except _Unsupported as exc:
            return False, f"unsupported value {exc}"
        if r.get("disable_check") == ["true"]:
            res = compile_unchecked(self.expr)
        else:
            # the conformance environment declares its variables; ours checks roots only when told
            res = compile_expression(self.expr)
        want_error = "eval_error" in r or "any_eval_errors" in r
        if res.program is None:
            detail = "; ".join(f"{i.code} @{i.offset}: {i.message}" for i in res.issues)
            # a case expecting an error is satisfied by a compile-time error only for parse errors
            return (want_error and all(i.code == "A44300" for i in res.issues)), f"compile: {detail}"
        got = res.program.evaluate_value(bindings)
        if want_error:
            return type(got) is Err, f"expected an error, got {got!r}"
        if type(got) is Err:
            return False, f"error {got.code}: {got.message}"
        return same(expected, got), f"expected {expected!r}, got {got!r}"


def load_cases(path: Path) -> list[Case]:
    data = textproto.parse(path.read_text(encoding="utf-8"))
    cases = []
    for sec in data.get("section", []):
        sname = sec["name"][0].decode()
        for t in sec.get("test", []):
            cases.append(Case(path.stem, sname, t["name"][0].decode(), t["expr"][0].decode("utf-8", "surrogatepass"), t))
    return cases


def run_file(path: Path) -> dict:
    counts = {"pass": 0, "fail": 0, "skip": 0, "failures": [], "skips": {}}
    for case in load_cases(path):
        reason = case.skip_reason()
        if reason:
            counts["skip"] += 1
            counts["skips"][reason] = counts["skips"].get(reason, 0) + 1
            continue
        try:
            ok, detail = case.run()
        except Exception as exc:  # a crash is a failure of ours, reported, not a test-runner crash
            ok, detail = False, f"CRASH {type(exc).__name__}: {exc}"
        if ok:
            counts["pass"] += 1
        else:
            counts["fail"] += 1
            counts["failures"].append(f"{case.id}: {case.expr!r}: {detail}")
    return counts
