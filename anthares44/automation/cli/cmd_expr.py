"""`a44 automation expr 'EXPR' [--vars JSON] [--jsonl]`: evaluate a CEL expression from the shell.

Prints the result as JSON (bytes as base64 under {"$bytes": ...}, uint as a plain number, type values as
their name). Exit 0 on a value, 1 on a compile issue or evaluation error, 2 on usage errors. `--jsonl`
reads `{"expr": ..., "vars": {...}}` lines from stdin and answers one JSON line each, never stopping on
a bad line.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import E_BAD_INPUT, EXIT_FINDINGS, EXIT_OK
from .output import usage_error


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("expr", help="evaluate a CEL expression (filters, if: conditions)",
                              description="Evaluate a CEL expression against JSON variables.")
    p.add_argument("expr", nargs="?", help="the expression, e.g. \"data.amountCents > 500000\"")
    p.add_argument("--vars", metavar="JSON", default=None,
                   help="variables as a JSON object, e.g. '{\"data\": {\"amountCents\": 600000}}'")
    p.add_argument("--jsonl", action="store_true",
                   help='read {"expr": ..., "vars": ...} lines from stdin, print one result line each')
    return p


def _jsonable(v):
    """Runtime value -> JSON-friendly value (bytes, uint and type values have no JSON spelling)."""
    import base64
    if isinstance(v, bytes):
        return {"$bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {(k if isinstance(k, str) else json.dumps(_jsonable(k))): _jsonable(x) for k, x in v.items()}
    return {"$type": str(v)}


def _dumps(obj) -> str:
    # NaN/Infinity are not JSON: spell them as strings rather than emit invalid JSON
    def fix(x):
        if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
            return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
        if isinstance(x, list):
            return [fix(y) for y in x]
        if isinstance(x, dict):
            return {k: fix(y) for k, y in x.items()}
        return x
    return json.dumps(fix(obj), ensure_ascii=False, sort_keys=False)


def _evaluate(text, variables) -> tuple[dict, list]:
    """Returns ({"value": ...} | {"error": {...}}, compile issues)."""
    from anthares44.automation.grammar import EvalError, compile_expression
    res = compile_expression(text)
    if res.program is None:
        first = res.issues[0]
        return {"error": {"code": first.code, "message": first.message, "offset": first.offset}}, res.issues
    try:
        return {"value": _jsonable(res.program.evaluate(variables))}, []
    except EvalError as exc:
        return {"error": {"code": exc.code, "message": exc.message}}, []


def _print_issues(text: str, issues) -> None:
    one_line = text.replace("\n", " ")
    for i in issues:
        msg = f"<expr>:1:{i.offset + 1}: {i.severity} {i.code} {i.message}"
        if i.hint:
            msg += f" (hint: {i.hint})"
        print(msg, file=sys.stderr)
        print("  " + one_line, file=sys.stderr)
        print("  " + " " * i.offset + "^" * max(1, min(i.length, len(one_line) - i.offset)), file=sys.stderr)


def _run_jsonl() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict) or not isinstance(req.get("expr"), str):
                raise ValueError('each line must be an object with a string "expr"')
            variables = req.get("vars") or {}
            if not isinstance(variables, dict):
                raise ValueError('"vars" must be an object')
        except ValueError as exc:
            out = {"error": {"code": E_BAD_INPUT, "message": str(exc)}}
        else:
            out, _ = _evaluate(req["expr"], variables)
        sys.stdout.write(_dumps(out) + "\n")
        sys.stdout.flush()
    return EXIT_OK


def run(args) -> int:
    if args.jsonl:
        if args.expr is not None or args.vars is not None:
            return usage_error("--jsonl reads expressions from stdin; give no EXPR or --vars")
        return _run_jsonl()
    if args.expr is None:
        return usage_error("an expression is required (or --jsonl)")
    variables = {}
    if args.vars is not None:
        try:
            variables = json.loads(args.vars)
        except ValueError as exc:
            return usage_error(f"--vars is not valid JSON: {exc}")
        if not isinstance(variables, dict):
            return usage_error("--vars must be a JSON object")
    out, issues = _evaluate(args.expr, variables)
    if issues:
        _print_issues(args.expr, issues)
        return EXIT_FINDINGS
    if "error" in out:
        print(f"error {out['error']['code']}: {out['error']['message']}", file=sys.stderr)
        return EXIT_FINDINGS
    print(_dumps(out["value"]))
    return EXIT_OK
