"""Syntax tree -> Python closures, built once per expression; evaluating is calling the root closure.

Each closure takes an `_Ctx` (variables, comprehension locals, remaining budget) and returns a value or
an `Err`. Strict operations propagate the first error argument; `&&`, `||`, `?:` and the all/exists
macros absorb errors as CEL specifies. The budget is charged per call, per comprehension iteration and
per element built; running out raises `CostExceeded`, which (unlike an error value) nothing absorbs. With a
deadline, the clock is read every 1,024 steps and passing it stops the evaluation the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeAlias

from . import functions as F
from .ast import Node
from .values import (
    E_COST,
    E_DUPLICATE_KEY,
    E_NO_SUCH_KEY,
    E_NO_SUCH_OVERLOAD,
    E_TYPE,
    E_UNKNOWN_IDENT,
    E_UNSUPPORTED,
    TYPES,
    CostExceeded,
    Err,
    UInt,
    Value,
    map_get,
    no_overload,
    type_name,
    valid_key,
)

DEFAULT_BUDGET = 1_000_000
_MISSING = object()

Scope: TypeAlias = frozenset[str]                   # the comprehension variables bound where a node is compiled
Eval: TypeAlias = "Callable[[_Ctx], Value]"          # a compiled node: evaluates it in a context


_CLOCK_EVERY = 1024     # budget steps between two looks at the clock when there is a deadline


class DeadlinePassed(CostExceeded):
    pass


class _Ctx:
    __slots__ = ("vars", "locals", "budget", "deadline", "_clock_at")

    def __init__(self, variables: dict[str, Value], budget: int, deadline: float | None = None) -> None:
        self.vars = variables
        self.locals: dict[str, Value] = {}
        self.budget = budget
        self.deadline = deadline
        self._clock_at = budget - _CLOCK_EVERY if deadline is not None else -1

    def charge(self, n: int) -> None:
        self.budget -= n
        if self.budget < self._clock_at:
            if self.budget < 0:
                raise CostExceeded()
            self._clock_at = self.budget - _CLOCK_EVERY
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise DeadlinePassed()
        elif self.budget < 0:
            raise CostExceeded()


def build(node: Node) -> Eval:
    """Compile a tree into its root closure."""
    return _Compiler().compile(node, frozenset())


class _Compiler:
    def compile(self, node: Node, scope: Scope) -> Eval:
        compile_kind: Callable[[Node, Scope], Eval] = getattr(self, "_" + node.kind)
        return compile_kind(node, scope)

    # -- literals ------------------------------------------------------------------------------
    def _const(self, value: Value) -> Eval:
        return lambda ctx: value

    def _int(self, node: Node, scope: Scope) -> Eval:
        return self._const(node.args[0])

    def _uint(self, node: Node, scope: Scope) -> Eval:
        return self._const(UInt(node.args[0]))

    def _double(self, node: Node, scope: Scope) -> Eval:
        return self._const(float(node.args[0]))

    def _string(self, node: Node, scope: Scope) -> Eval:
        return self._const(node.args[0])

    def _bytes(self, node: Node, scope: Scope) -> Eval:
        return self._const(bytes.fromhex(node.args[0]))

    def _bool(self, node: Node, scope: Scope) -> Eval:
        return self._const(bool(node.args[0]))

    def _null(self, node: Node, scope: Scope) -> Eval:
        return self._const(None)

    # -- names ---------------------------------------------------------------------------------
    def _ident(self, node: Node, scope: Scope) -> Eval:
        name: str = node.args[0]
        off = node.offset
        if name in scope:
            return lambda ctx: ctx.locals[name]
        name = name.lstrip(".")
        builtin = TYPES.get(name, _MISSING)

        def ident(ctx: _Ctx) -> Value:
            v = ctx.vars.get(name, _MISSING)
            if v is _MISSING:
                if builtin is not _MISSING:
                    return builtin
                return Err(E_UNKNOWN_IDENT, f"undeclared reference to '{name}'", off)
            return v
        return ident

    def _select(self, node: Node, scope: Scope) -> Eval:
        operand = self.compile(node.args[0], scope)
        field: str = node.args[1]
        off = node.offset
        qualified = _qualified_name(node, scope)

        def select(ctx: _Ctx) -> Value:
            if qualified is not None:  # a variable may itself be named "a.b.c" (CEL qualified names)
                v = ctx.vars.get(qualified, _MISSING)
                if v is not _MISSING:
                    return v
            obj = operand(ctx)
            if type(obj) is dict:
                found, v = map_get(obj, field)
                if found:
                    return v
                return Err(E_NO_SUCH_KEY, f"no such key: '{field}'", off)
            if type(obj) is Err:
                return obj
            return Err(E_TYPE, f"cannot select field '{field}' from a value of type {type_name(obj)}", off)
        return select

    def _has(self, node: Node, scope: Scope) -> Eval:
        operand = self.compile(node.args[0], scope)
        field: str = node.args[1]
        off = node.offset

        def has(ctx: _Ctx) -> Value:
            obj = operand(ctx)
            if type(obj) is dict:
                return map_get(obj, field)[0]
            if type(obj) is Err:
                return obj
            return Err(E_TYPE, f"has() cannot test field '{field}' on a value of type {type_name(obj)}", off)
        return has

    def _index(self, node: Node, scope: Scope) -> Eval:
        operand = self.compile(node.args[0], scope)
        key = self.compile(node.args[1], scope)
        return self._strict(F.index, [operand, key], node.offset)

    # -- calls ---------------------------------------------------------------------------------
    def _call(self, node: Node, scope: Scope) -> Eval:
        name, target, args = node.args
        fns = ([self.compile(target, scope)] if target is not None else []) + \
              [self.compile(a, scope) for a in args]
        impl = F.lookup(name, target is not None, len(fns))
        if impl is None:
            shown = name.strip("_") if name.startswith("_") else name
            msg = f"no such function or overload: {shown}/{len(fns)}"
            err = Err(E_NO_SUCH_OVERLOAD, msg, node.offset)

            def unknown(ctx: _Ctx) -> Value:
                for f in fns:  # still surface argument errors first, as strict evaluation does
                    v = f(ctx)
                    if type(v) is Err:
                        return v
                return err
            return unknown
        return self._strict(impl, fns, node.offset)

    @staticmethod
    def _strict(impl: Callable[..., Value], fns: list[Eval], off: int) -> Eval:
        if len(fns) == 1:
            (f0,) = fns

            def call1(ctx: _Ctx) -> Value:
                ctx.charge(1)
                a = f0(ctx)
                if type(a) is Err:
                    return a
                return _located(impl(a), off)
            return call1
        if len(fns) == 2:
            f0, f1 = fns

            def call2(ctx: _Ctx) -> Value:
                ctx.charge(1)
                a = f0(ctx)
                if type(a) is Err:
                    return a
                b = f1(ctx)
                if type(b) is Err:
                    return b
                return _located(impl(a, b), off)
            return call2

        def calln(ctx: _Ctx) -> Value:  # pragma: no cover - no standard function takes more than two arguments
            ctx.charge(1)
            vals: list[Value] = []
            for f in fns:
                v = f(ctx)
                if type(v) is Err:
                    return v
                vals.append(v)
            return _located(impl(*vals), off)
        return calln

    # -- logic ---------------------------------------------------------------------------------
    def _and(self, node: Node, scope: Scope) -> Eval:
        return self._logic(node, scope, short=False, op="_&&_")

    def _or(self, node: Node, scope: Scope) -> Eval:
        return self._logic(node, scope, short=True, op="_||_")

    def _logic(self, node: Node, scope: Scope, short: bool, op: str) -> Eval:
        fns = [self.compile(a, scope) for a in node.args[0]]
        off = node.offset

        def logic(ctx: _Ctx) -> Value:
            # CEL's commutative logic: the deciding value (false for &&, true for ||) wins over errors
            # whatever side they are on; otherwise the first error (or non-bool) is the result.
            err: Value = None
            for f in fns:
                v = f(ctx)
                if v is short:
                    return short
                if v is not (not short) and err is None:
                    err = v if type(v) is Err else no_overload(op, v, offset=off)
            return err if err is not None else (not short)
        return logic

    def _cond(self, node: Node, scope: Scope) -> Eval:
        test, then, other = (self.compile(a, scope) for a in node.args)
        off = node.offset

        def cond(ctx: _Ctx) -> Value:
            t = test(ctx)
            if t is True:
                return then(ctx)
            if t is False:
                return other(ctx)
            return t if type(t) is Err else no_overload("_?_:_", t, offset=off)
        return cond

    # -- aggregates ----------------------------------------------------------------------------
    def _list(self, node: Node, scope: Scope) -> Eval:
        fns = [self.compile(a, scope) for a in node.args[0]]

        def make_list(ctx: _Ctx) -> Value:
            ctx.charge(1 + len(fns))
            out: list[Value] = []
            for f in fns:
                v = f(ctx)
                if type(v) is Err:
                    return v
                out.append(v)
            return out
        return make_list

    def _map(self, node: Node, scope: Scope) -> Eval:
        entries = [(self.compile(k, scope), self.compile(v, scope), k.offset) for k, v in node.args[0]]

        def make_map(ctx: _Ctx) -> Value:
            ctx.charge(1 + len(entries))
            out: dict[Any, Value] = {}
            for kf, vf, koff in entries:
                k = kf(ctx)
                if type(k) is Err:
                    return k
                if not valid_key(k):
                    return Err(E_TYPE, f"unsupported map key type: {type_name(k)}", koff)
                if map_get(out, k)[0]:
                    return Err(E_DUPLICATE_KEY, f"Failed with repeated key: {k!r}", koff)
                v = vf(ctx)
                if type(v) is Err:
                    return v
                out[k] = v
            return out
        return make_map

    def _message(self, node: Node, scope: Scope) -> Eval:
        err = Err(E_UNSUPPORTED, f"message construction ({node.args[0]}{{...}}) is not supported",
                  node.offset)
        return lambda ctx: err

    # -- macros --------------------------------------------------------------------------------
    def _comp(self, node: Node, scope: Scope) -> Eval:
        from .macros import build_macro
        macro, rng, var, _var2, args = node.args
        inner = scope | {var}
        return build_macro(macro, self.compile(rng, scope), var,
                           [self.compile(a, inner) for a in args], node.offset)


def _located(v: Value, off: int) -> Value:
    if type(v) is Err and v.offset < 0:
        v.offset = off
    return v


def _qualified_name(node: Node, scope: Scope) -> str | None:
    parts: list[str] = []
    while node.kind == "select":
        parts.append(node.args[1])
        node = node.args[0]
    if node.kind != "ident" or node.args[0] in scope:
        return None
    parts.append(node.args[0].lstrip("."))
    return ".".join(reversed(parts))


def run(root: Eval, variables: dict[str, Value], budget: int = DEFAULT_BUDGET,
        deadline: float | None = None) -> Value:
    """Evaluate a compiled root closure; cost/recursion exhaustion and a passed deadline (time.monotonic())
    become error values here."""
    ctx = _Ctx(variables, budget, deadline)
    try:
        return root(ctx)
    except DeadlinePassed:
        return Err(E_COST, "evaluation ran past its deadline")
    except CostExceeded:
        return Err(E_COST, f"evaluation exceeded its cost budget ({budget} steps)")
    except RecursionError:
        return Err(E_COST, "evaluation nested too deeply (input value or expression)")


__all__ = ["build", "run", "DEFAULT_BUDGET", "E_NO_SUCH_OVERLOAD"]
