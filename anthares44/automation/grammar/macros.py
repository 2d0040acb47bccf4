"""The comprehension macros: all, exists, exists_one, map (2 and 3 arguments) and filter.

Each iterates a list (its elements) or a map (its keys), binding the loop variable in the evaluation
context's locals and restoring any outer binding of the same name afterwards (nested macros may reuse
names). `all`/`exists` absorb errors like `&&`/`||`; the others are strict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from .functions import MAX_LIST
from .values import E_OVERFLOW, Err, Value, no_overload

if TYPE_CHECKING:
    from .evaluator import Eval, _Ctx

Body: TypeAlias = "Callable[[_Ctx, list[Value]], Value]"   # a macro's loop over the elements (or keys)

_UNSET = object()


def build_macro(macro: str, rng: Eval, var: str, fns: list[Eval], off: int) -> Eval:
    def items(ctx: _Ctx) -> Value:
        coll = rng(ctx)
        t = type(coll)
        if t is list or t is dict:
            return coll
        if t is Err:
            return coll
        return no_overload(macro, coll, offset=off)

    def loop(ctx: _Ctx, body: Body) -> Value:
        coll = items(ctx)
        if type(coll) is Err:
            return coll
        locals_ = ctx.locals
        saved = locals_.get(var, _UNSET)
        try:
            return body(ctx, list(coll))
        finally:
            if saved is _UNSET:
                locals_.pop(var, None)
            else:
                locals_[var] = saved

    if macro in ("all", "exists"):
        pred = fns[0]
        decisive = macro == "exists"   # exists stops at true, all stops at false

        def quantifier(ctx: _Ctx, elems: list[Value]) -> Value:
            err: Value = None
            for e in elems:
                ctx.charge(1)
                ctx.locals[var] = e
                v = pred(ctx)
                if v is decisive:
                    return decisive
                if v is not (not decisive) and err is None:
                    err = v if type(v) is Err else no_overload(macro, v, offset=off)
            return err if err is not None else (not decisive)
        return lambda ctx: loop(ctx, quantifier)

    if macro == "exists_one":
        pred = fns[0]

        def exists_one(ctx: _Ctx, elems: list[Value]) -> Value:
            count = 0
            for e in elems:
                ctx.charge(1)
                ctx.locals[var] = e
                v = pred(ctx)
                if v is True:
                    count += 1
                elif v is not False:
                    return v if type(v) is Err else no_overload(macro, v, offset=off)
            return count == 1
        return lambda ctx: loop(ctx, exists_one)

    keep_if: Eval | None
    if macro == "filter" or (macro == "map" and len(fns) == 2):
        keep_if = fns[0]
        transform = fns[1] if macro == "map" else None
    else:
        keep_if = None
        transform = fns[0]

    def map_filter(ctx: _Ctx, elems: list[Value]) -> Value:
        out: list[Value] = []
        for e in elems:
            ctx.charge(1)
            ctx.locals[var] = e
            if keep_if is not None:
                keep = keep_if(ctx)
                if keep is False:
                    continue
                if keep is not True:
                    return keep if type(keep) is Err else no_overload(macro, keep, offset=off)
            v = transform(ctx) if transform is not None else e
            if type(v) is Err:
                return v
            out.append(v)
            if len(out) > MAX_LIST:
                return Err(E_OVERFLOW, f"list result longer than {MAX_LIST} elements", off)
        return out
    return lambda ctx: loop(ctx, map_filter)
