"""Compile-time checks over a syntax tree: unknown roots, unknown/later steps, obvious type errors.

Types are inferred only where they are certain (literals and what standard operators return); anything
coming from variables is `None` (dyn) and never reported. So the checker never rejects an expression
that could succeed at run time, except for calls no overload can ever satisfy.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass

from ..suggestions import closest, first_names
from . import codes
from .ast import Node
from .functions import KNOWN_NAMES, lookup
from .values import TYPES

_NUM = {"int", "uint", "double"}
_ARITH = {"_+_": _NUM | {"string", "bytes", "list"}, "_-_": _NUM, "_*_": _NUM, "_/_": _NUM,
          "_%_": {"int", "uint"}}
_ORDER = {"_<_", "_<=_", "_>_", "_>=_"}
_RESULT = {"size": "int", "contains": "bool", "startsWith": "bool", "endsWith": "bool", "matches": "bool",
           "int": "int", "uint": "uint", "double": "double", "string": "string", "bytes": "bytes",
           "bool": "bool", "type": "type", "_==_": "bool", "_!=_": "bool", "_in_": "bool", "!_": "bool"}
_SYMBOL = {"_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "_<_": "<", "_<=_": "<=",
           "_>_": ">", "_>=_": ">=", "_==_": "==", "_!=_": "!=", "_in_": "in", "!_": "!", "-_": "-"}
_DASHED_STEP = re.compile(r"\bsteps\s*\.\s*([A-Za-z_][A-Za-z0-9_]*(?:\s*-\s*[A-Za-z0-9_]+)+)")


@dataclass
class Finding:
    code: str
    message: str
    offset: int
    length: int = 1
    hint: str | None = None


def referenced_roots(node: Node) -> frozenset[str]:
    """Top-level identifiers the expression reads (comprehension variables excluded)."""
    found: set[str] = set()
    stack: list[tuple[Node, frozenset[str]]] = [(node, frozenset())]
    while stack:
        n, scope = stack.pop()
        if n.kind == "ident":
            if n.args[0] not in scope:
                found.add(n.args[0].lstrip("."))
            continue
        if n.kind == "comp":
            stack.append((n.args[1], scope))
            inner = scope | {n.args[2]}
            stack.extend((a, inner) for a in n.args[4])
            continue
        stack.extend((c, scope) for c in n.children())
    return frozenset(found)


class Checker:
    def __init__(self, text: str, roots: set[str] | None, step_ids: Collection[str] | None,
                 fields: dict[str, dict[str, str]] | None = None) -> None:
        self.text = text
        self.roots = roots
        self.step_ids = step_ids
        self.fields = fields or {}      # root -> field -> type, for roots whose shape is fixed (`rows`)
        self.findings: list[Finding] = []
        self._quiet: list[tuple[int, int]] = []   # spans whose unknown-root findings are explained already

    def run(self, node: Node) -> str | None:
        self._dashed_steps()
        return self.visit(node, frozenset())

    # -- steps ---------------------------------------------------------------------------------
    def _dashed_steps(self) -> None:
        """`steps.reserve-funds` parses as `steps.reserve - funds`: say what was meant."""
        if self.step_ids is None and self.roots is None:
            return
        for m in _DASHED_STEP.finditer(self.text):
            wanted = re.sub(r"\s+", "", m.group(1))
            known = self.step_ids is None or wanted in self.step_ids
            msg = (f"step id '{wanted}' contains '-', so steps.{wanted} reads as a subtraction"
                   if known else f"unknown step '{wanted}' (and '-' reads as a subtraction)")
            self.findings.append(Finding(codes.UNKNOWN_STEP, msg, m.start(), m.end() - m.start(),
                                         f"write steps['{wanted}']"))
            self._quiet.append((m.start(), m.end()))

    def _check_step(self, step: str, offset: int, length: int) -> None:
        if self.step_ids is None or step in self.step_ids:
            return
        if any(a <= offset < b for a, b in self._quiet):
            return
        c = closest(step, self.step_ids, 0.5)
        hint = None
        if c:
            hint = f"did you mean steps['{c}']?" if "-" in c else f"did you mean steps.{c}?"
        elif self.step_ids:
            hint = "steps available here: " + ", ".join(first_names(self.step_ids, 10))
        else:
            hint = "no earlier step is available here"
        self.findings.append(Finding(
            codes.UNKNOWN_STEP,
            f"unknown step '{step}': only steps that run earlier can be referenced", offset, length, hint))

    # -- walk ----------------------------------------------------------------------------------
    def visit(self, n: Node, scope: frozenset[str]) -> str | None:
        k = n.kind
        if k in ("int", "uint", "double", "string", "bytes", "bool"):
            return k
        if k == "null":
            return "null"
        if k == "ident":
            return self._ident(n, scope)
        if k in ("select", "has"):
            target = n.args[0]
            if target.kind == "ident" and target.args[0] == "steps" and "steps" not in scope:
                self._check_step(n.args[1], n.offset, len(n.args[1]))
            t = self.visit(target, scope)
            if t is not None and t not in ("map", "type"):
                self._type(n, f"cannot select field '{n.args[1]}' from a value of type {t}")
            if k == "select" and target.kind == "ident" and target.args[0] in self.fields and \
                    target.args[0] not in scope:
                return self.fields[target.args[0]].get(n.args[1])
            return "bool" if k == "has" else None
        if k == "index":
            target, idx = n.args
            if (target.kind == "ident" and target.args[0] == "steps" and "steps" not in scope
                    and idx.kind == "string"):
                self._check_step(idx.args[0], idx.offset, len(idx.args[0]) + 2)
            t, it = self.visit(target, scope), self.visit(idx, scope)
            if t is not None and t not in ("list", "map"):
                self._type(n, f"cannot index a value of type {t}")
            elif t == "list" and it is not None and it not in _NUM:
                self._type(n, f"a list index must be a number, found {it}")
            return None
        if k in ("and", "or"):
            for op in n.args[0]:
                t = self.visit(op, scope)
                if t is not None and t != "bool":
                    sym = "&&" if k == "and" else "||"
                    self._type(op, f"operator {sym} needs booleans, found {t}")
            return "bool"
        if k == "cond":
            test, a, b = (self.visit(x, scope) for x in n.args)
            if test is not None and test != "bool":
                self._type(n.args[0], f"the condition of ?: must be a boolean, found {test}")
            return a if a == b else None
        if k == "list":
            for e in n.args[0]:
                self.visit(e, scope)
            return "list"
        if k == "map":
            for key, val in n.args[0]:
                kt = self.visit(key, scope)
                if kt is not None and kt not in ("int", "uint", "bool", "string"):
                    self._type(key, f"a map key must be int, uint, bool or string, found {kt}")
                self.visit(val, scope)
            return "map"
        if k == "message":
            self.findings.append(Finding(codes.UNSUPPORTED, f"message construction ({n.args[0]}{{...}}) is not "
                                         "supported: use a map literal", n.offset, len(n.args[0])))
            for _f, val in n.args[1]:
                self.visit(val, scope)
            return None
        if k == "comp":
            return self._comp(n, scope)
        if k == "call":
            return self._call(n, scope)
        return None  # pragma: no cover

    def _ident(self, n: Node, scope: frozenset[str]) -> str | None:
        name = n.args[0]
        if name in scope:
            return None
        bare = name.lstrip(".")
        if self.roots is not None and bare not in self.roots:
            if bare in TYPES:
                return "type"
            if any(a <= n.offset < b for a, b in self._quiet):
                return None
            close = difflib.get_close_matches(bare, sorted(self.roots), n=1, cutoff=0.6)
            hint = (f"did you mean '{close[0]}'?" if close else
                    ("names available here: " + ", ".join(sorted(self.roots)) if self.roots else None))
            self.findings.append(Finding(codes.UNKNOWN_ROOT, f"unknown identifier '{bare}'", n.offset,
                                         len(name), hint))
            return None
        if self.roots is None and bare in TYPES:
            return "type"
        return None

    def _comp(self, n: Node, scope: frozenset[str]) -> str | None:
        macro, rng, var, _v2, args = n.args
        rt = self.visit(rng, scope)
        if rt is not None and rt not in ("list", "map"):
            self._type(n, f"{macro}() needs a list or a map, found {rt}")
        inner = scope | {var}
        types = [self.visit(a, inner) for a in args]
        preds = types[:1] if macro != "map" else (types[:1] if len(types) == 2 else [])
        for t, a in zip(preds, args):
            if t is not None and t != "bool":
                self._type(a, f"the predicate of {macro}() must be a boolean, found {t}")
        return "list" if macro in ("map", "filter") else "bool"

    def _call(self, n: Node, scope: frozenset[str]) -> str | None:
        name, target, args = n.args
        tt = self.visit(target, scope) if target is not None else None
        ats = [self.visit(a, scope) for a in args]
        arity = len(args) + (target is not None)
        if lookup(name, target is not None, arity) is None:
            if name in KNOWN_NAMES:
                style = "as a method" if target is not None else "as a function"
                self._type(n, f"{name}() cannot be called {style} with {len(args)} argument(s)")
            else:
                self._type(n, f"unknown function '{name}'")
            return None
        sym = _SYMBOL.get(name, name)
        if name in _ARITH:
            a, b = ats
            if a is not None and b is not None and (a != b or a not in _ARITH[name]):
                self._type(n, f"no operator {sym} for {a} and {b}")
            elif a is not None and a not in _ARITH[name] or b is not None and b not in _ARITH[name]:
                self._type(n, f"no operator {sym} for {a or b}")
            return a if a == b else None
        if name in _ORDER:
            a, b = ats
            if a is not None and b is not None and not (a in _NUM and b in _NUM) and \
                    not (a == b and a in ("string", "bytes", "bool")):
                self._type(n, f"cannot compare {a} {sym} {b}")
            return "bool"
        if name == "!_" and ats[0] is not None and ats[0] != "bool":
            self._type(n, f"operator ! needs a boolean, found {ats[0]}")
        if name == "-_":
            if ats[0] is not None and ats[0] not in ("int", "double"):
                self._type(n, f"cannot negate a value of type {ats[0]}")
            return ats[0]
        if name == "_in_" and ats[1] is not None and ats[1] not in ("list", "map"):
            self._type(n, f"'in' needs a list or a map on its right, found {ats[1]}")
        if name == "size":
            t = tt if target is not None else ats[0]
            if t is not None and t not in ("string", "bytes", "list", "map"):
                self._type(n, f"size() needs a string, bytes, list or map, found {t}")
        if name in ("contains", "startsWith", "endsWith", "matches"):
            for t in ([tt] if target is not None else []) + ats:
                if t is not None and t != "string":
                    self._type(n, f"{name}() needs strings, found {t}")
        if name == "matches":
            self._literal_pattern(args[-1])
        return _RESULT.get(name)

    def _literal_pattern(self, n: Node) -> None:
        """A pattern written as a literal is compiled now, so RE2-refused syntax is a diagnostic, not a run failure."""
        if n.kind != "string":
            return
        from .regex import problem

        reason = problem(n.args[0])
        if reason is not None:
            self.findings.append(Finding(codes.UNSUPPORTED, f"matches() pattern cannot be used: {reason}", n.offset, 1,
                                         hint="matches() uses RE2 syntax (docs/expressions.md)"))

    def _type(self, n: Node, message: str) -> None:
        self.findings.append(Finding(codes.TYPE_ERROR, message, n.offset, 1))
