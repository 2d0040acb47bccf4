"""The bounded Jinja2 sandbox: an immutable sandboxed environment whose templates cannot render without limit.

A template is data from a workflow author and runs on the daemon, so every way it can spend memory or CPU is
capped (`Limits`): rendered output, `range` size, loop iterations and calls (one budget per rendering, with a
deadline checked as it counts), string and list repetition, `+` concatenation, `%` / `format` widths, width
filters (`center`, `indent`...), `replace` / `join` results and `namespace` attributes. Passing a limit raises
`TemplateLimit` naming the limit and the value; the runtime turns it into E_TEMPLATE_LIMIT.

Loop iterations are counted by rewriting every `{% for %}` at parse time so its iterable passes through a
counting filter: Jinja has no iteration hook, and this keeps the generated code Jinja's own.
"""

from __future__ import annotations

import contextvars
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

from jinja2 import nodes
from jinja2.runtime import Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace


@dataclass(frozen=True)
class Limits:
    output: int = 1 << 20          # characters a rendering produces, and any one string it builds
    range: int = 100_000           # items of one range()
    items: int = 100_000           # elements of one list built by repetition, batch or slice
    iterations: int = 1_000_000    # loop iterations + calls of one rendering
    width: int = 10_000            # a format width or precision (`%-9999s`, `{:>9999}`, center(9999))
    power_bits: int = 100_000      # size of an integer built with **


LIMITS = Limits()
LOOP_FILTER = "_a44_counted"       # the filter the parse-time rewrite wraps every loop iterable in
_CLOCK_EVERY = 1024                # ticks between two looks at the clock


class TemplateLimit(Exception):
    def __init__(self, limit: str, value: object, bound: object) -> None:
        super().__init__(f"{limit} limit: {value} > {bound}")
        self.limit, self.value, self.bound = limit, value, bound


class Budget:
    """What one rendering may still spend: iterations and calls, and a deadline (time.monotonic())."""
    __slots__ = ("left", "output", "deadline", "limits", "_clock_in")

    def __init__(self, limits: Limits = LIMITS, deadline: float | None = None) -> None:
        self.limits = limits
        self.left = limits.iterations
        self.output = limits.output
        self.deadline = deadline
        self._clock_in = _CLOCK_EVERY

    def tick(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise TemplateLimit("loop iterations", self.limits.iterations - self.left, self.limits.iterations)
        self._clock_in -= n
        if self._clock_in <= 0:
            self._clock_in = _CLOCK_EVERY
            self.check_time()

    def spend_output(self, n: int) -> None:
        """`n` more characters rendered (all the templates of one budget together)."""
        self.output -= n
        if self.output < 0:
            raise TemplateLimit("output size", f"{self.limits.output - self.output} characters", self.limits.output)
        self.check_time()

    def check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TemplateLimit("time", "the rendering ran past its deadline", "the step's timeout")


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("a44_template_budget", default=None)


class spending:
    """`with spending(budget):` renders in the block count against `budget` (per thread / task context)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def __enter__(self) -> Budget:
        self._token = _BUDGET.set(self.budget)
        return self.budget

    def __exit__(self, *exc: object) -> None:
        _BUDGET.reset(self._token)


def _tick(n: int = 1) -> None:
    b = _BUDGET.get()
    if b is not None:
        b.tick(n)


T = TypeVar("T")


def _check_size(value: T, limits: Limits, what: str) -> T:
    v: Any = value       # exact type tests (mypy does not narrow through `t`): subclasses are not counted
    t = type(v)
    if t is str or t is bytes:
        if len(v) > limits.output:
            raise TemplateLimit(f"{what} size", f"{len(v)} characters", limits.output)
    elif t is list or t is tuple or t is dict:
        if len(v) > limits.items:
            raise TemplateLimit(f"{what} size", f"{len(v)} elements", limits.items)
    return value


def _shallow(value: object) -> int:
    """A cheap lower bound of how much text a value stands for (what repeating it multiplies)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return len(value) + sum(len(v) for v in value if isinstance(v, (str, bytes, list, tuple, dict)))
    return 1


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """The loop rewrite's filter: yields the iterable's items, one budget tick each."""
    for item in iterable:
        _tick()
        yield item


# `%[(name)][flags][width][.precision]type`
_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
# format spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?")


def _check_width(value: str | None, limits: Limits) -> None:
    if value and value.isdigit() and int(value) > limits.width:
        raise TemplateLimit("format width", int(value), limits.width)


def _check_star_args(args: Iterable[object], limits: Limits) -> None:
    """A width taken from the arguments (`%*d`, `{:{w}}`): any int argument may be it."""
    for v in args:
        if type(v) is int and v > limits.width:
            raise TemplateLimit("format width", v, limits.width)


def check_percent(fmt: str, args: object, limits: Limits = LIMITS) -> None:
    for m in _PERCENT.finditer(fmt):
        width, precision = m.groups()
        if "*" in (width, precision):
            _check_star_args(args if isinstance(args, tuple) else (args,), limits)
        _check_width(width, limits)
        _check_width(precision, limits)


def _check_format(fmt: str, args: Iterable[object], kwargs: dict[str, object], limits: Limits, depth: int = 0) -> None:
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format will say what is wrong with it
    for _, _name, spec, _ in fields:
        if not spec:
            continue
        if "{" in spec:
            _check_star_args(list(args) + list(kwargs.values()), limits)
            continue
        m = _SPEC.match(spec)
        if m:
            _check_width(m.group(1), limits)
            _check_width(m.group(2), limits)


def _ctx_offset(fn: object) -> int:
    """Filters marked pass_context / pass_environment / pass_eval_context get that object first."""
    return 1 if hasattr(fn, "jinja_pass_arg") else 0


def _guard_filter(name: str, fn: Callable[..., Any], limits: Limits) -> Callable[..., Any]:
    skip = _ctx_offset(fn)

    @wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        rest = args[skip:]
        if name == "format" and rest:
            check_percent(str(rest[0]), tuple(rest[1:]) or tuple(kwargs.values()), limits)
        elif name == "center":
            _check_star_args(list(rest[1:]) + list(kwargs.values()), limits)
        elif name == "indent" and rest:
            width = rest[1] if len(rest) > 1 else kwargs.get("width", 4)
            _check_grown(str(rest[0]), "\n", width if type(width) is int else len(str(width)), limits)
        elif name in ("slice", "batch"):
            for v in list(rest[1:2]) + [kwargs.get("slices"), kwargs.get("linecount")]:
                if type(v) is int and v > limits.items:
                    raise TemplateLimit(f"{name} size", v, limits.items)
        elif name == "replace" and len(rest) >= 3:
            _check_replace(rest[0], rest[1], rest[2], limits)
        elif name == "join" and rest:
            items = list(rest[0])
            sep = rest[1] if len(rest) > 1 else kwargs.get("d", "")
            _check_join(sep, items, limits)
            args = args[:skip] + (items,) + args[skip + 1:]
        return _check_size(fn(*args, **kwargs), limits, f"{name} result")
    return guarded


def _check_replace(s: object, old: object, new: object, limits: Limits) -> None:
    if isinstance(s, str) and isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
        hits = s.count(old) if old else len(s) + 1
        grown = len(s) + hits * (len(new) - len(old))
        if grown > limits.output:
            raise TemplateLimit("replace result size", f"{grown} characters", limits.output)


def _check_grown(s: str, sep: str, width: int, limits: Limits) -> None:
    """`width` characters added per `sep` in `s` (indent per line, expandtabs per tab)."""
    grown = len(s) + (s.count(sep) + 1) * max(width, 0)
    if grown > limits.output:
        raise TemplateLimit("padding result size", f"{grown} characters", limits.output)


def _check_join(sep: str, items: list[Any], limits: Limits) -> None:
    if len(items) > limits.items:
        raise TemplateLimit("join size", f"{len(items)} elements", limits.items)
    total = len(sep) * max(len(items) - 1, 0) + sum(len(v) for v in items if isinstance(v, str))
    if total > limits.output:
        raise TemplateLimit("join result size", f"{total} characters", limits.output)


_GUARDED_FILTERS = ("format", "center", "indent", "slice", "batch", "replace", "join", "wordwrap", "truncate",
                    "list", "string", "tojson", "pprint", "sum", "urlize", "title", "upper", "lower", "trim")
_WIDTH_METHODS = {"center", "ljust", "rjust", "zfill", "expandtabs"}


def _bounded_namespace(limits: Limits) -> type[Namespace]:
    class BoundedNamespace(Namespace):
        """`namespace()` whose attributes are size-checked: assigning to one is the only way a value can grow
        across loop iterations."""

        def __setitem__(self, name: str, value: Any) -> None:
            super().__setitem__(name, _check_size(value, limits, "namespace value"))

    return BoundedNamespace


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "+", "%", "**"})

    def __init__(self, limits: Limits = LIMITS, **options: Any) -> None:
        super().__init__(**options)
        self.limits = limits
        self.globals["range"] = self._range
        self.globals["namespace"] = _bounded_namespace(limits)
        self.filters[LOOP_FILTER] = _counted
        for name in _GUARDED_FILTERS:
            if name in self.filters:
                self.filters[name] = _guard_filter(name, self.filters[name], limits)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, LOOP_FILTER, [], [], None, None, lineno=loop.lineno)
        return tree

    def _range(self, *args: int) -> range:
        rng = range(*args)
        if len(rng) > self.limits.range:
            raise TemplateLimit("range", len(rng), self.limits.range)
        return rng

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        lim = self.limits
        if operator == "*":
            seq, n = (left, right) if type(right) in (int, bool) else (right, left)
            if isinstance(seq, (str, bytes, list, tuple)) and type(n) in (int, bool) and n > 1:
                if isinstance(seq, (list, tuple)) and len(seq) * n > lim.items:
                    raise TemplateLimit("repetition", f"{len(seq) * n} elements", lim.items)
                if _shallow(seq) * n > lim.output:
                    raise TemplateLimit("repetition", f"{_shallow(seq) * n} characters", lim.output)
        elif operator == "+":
            if isinstance(left, (str, list, tuple)) and type(left) is type(right):
                _check_size(left + right, lim, "concatenation")  # type: ignore[operator]  # one type: checked above
        elif operator == "%":
            if isinstance(left, str):
                check_percent(left, right, lim)
        elif operator == "**":
            if type(left) is int and type(right) is int and abs(left) > 1 and right > 0 and \
                    right * abs(left).bit_length() > lim.power_bits:
                raise TemplateLimit("power", f"about {right * abs(left).bit_length()} bits", lim.power_bits)
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt, lim, is_map = value.__self__, self.limits, value.__name__ == "format_map"

        @wraps(wrapped)
        def checked(*args: Any, **kwargs: Any) -> str:
            if is_map and len(args) == 1 and isinstance(args[0], dict):
                _check_format(fmt, (), args[0], lim)
            else:
                _check_format(fmt, args, kwargs, lim)
            return _check_size(wrapped(*args, **kwargs), lim, "format result")
        return checked

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - the sandbox's own signature
        _tick()
        lim = __self.limits
        if isinstance(__obj, Macro):  # a recursive macro can double an argument on every call
            for v in args:
                _check_size(v, lim, "macro argument")
            for v in kwargs.values():
                _check_size(v, lim, "macro argument")
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            method = getattr(__obj, "__name__", "")
            if method in _WIDTH_METHODS:
                _check_star_args(list(args) + list(kwargs.values()), lim)
                if method == "expandtabs":
                    size = (list(args) + list(kwargs.values()) or [8])[0]
                    _check_grown(owner, "\t", size if type(size) is int else 0, lim)
            elif method == "replace" and len(args) >= 2:
                _check_replace(owner, args[0], args[1], lim)
            elif method == "join" and args:
                items = list(args[0])
                _check_join(owner, items, lim)
                args = (items,) + args[1:]
        return _check_size(super().call(__context, __obj, *args, **kwargs), lim, "call result")
