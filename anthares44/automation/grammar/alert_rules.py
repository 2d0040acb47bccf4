"""The language of alert rules (docs/alerts.md): the metrics a rule may name with their labels, label filters
(`queue="q_invoice_settle", workflow!="wf_x"`) and conditions (`min_over_time(10m) > 0`, `rate(5m) >= 0.5`,
`> 100` on the last value), parsed by a tight hand parser into plain values, and evaluated on samples.

Every mistake is an A44Error with a stable code and a did-you-mean; nothing here does I/O, so `lint` checks a
`kind: alert` file with exactly the rules `a44 monitor alert create` applies.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from ..durations import format_seconds, parse_duration
from ..errors import E_ALERT_CONDITION, E_ALERT_FILTER, E_ALERT_METRIC, E_ALERT_RULE_INVALID, A44Error
from ..suggestions import closest, listing

# metric -> its labels (besides the project, which every rule is scoped to); the daemon samples these
METRICS: dict[str, tuple[str, ...]] = {
    "automation.dlq_depth": ("queue",),
    "automation.oldest_message_age_seconds": ("queue",),
    "automation.queue_waiting": ("queue",),
    "automation.lease_reclaim_total": (),
    "automation.runs": ("workflow", "state"),
    "automation.run_redeliveries_total": ("workflow",),
    "automation.approvals_overdue": (),     # open approvals past their first reminder (docs/approvals.md)
}
FUNCTIONS = ("min_over_time", "max_over_time", "avg_over_time", "rate", "increase")
OPERATORS = (">=", "<=", "==", "!=", ">", "<")
SEVERITIES = ("p1", "p2", "p3", "p4")
BUILTIN = "builtin"             # the name of the row that routes the built-in alerts (runtime/alerts/rules.py)
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
MAX_WINDOW_S = 7 * 86400.0
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class Matcher:
    label: str
    negate: bool
    value: str

    def matches(self, labels: dict[str, Any]) -> bool:
        return (str(labels.get(self.label, "")) == self.value) != self.negate

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.label}{"!=" if self.negate else "="}"{escaped}"'


@dataclass(frozen=True)
class Condition:
    function: str | None        # None: the last value
    window_s: float | None
    op: str
    threshold: float

    def __str__(self) -> str:
        head = f"{self.function}({window_text(self.window_s)}) " if self.function else ""
        return f"{head}{self.op} {_num(self.threshold)}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


def window_text(seconds: float | None) -> str:
    """`10m`, `90s`, `1h`, `250ms`: the largest unit that divides the window (it parses back to the same)."""
    s = float(seconds or 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{round(s * 1000)}ms"


# --- parsing -----------------------------------------------------------------------------------------------
def check_metric(metric: str) -> tuple[str, ...]:
    """The labels of `metric`; E_ALERT_METRIC with a did-you-mean for another name."""
    labels = METRICS.get(metric)
    if labels is None:
        near = closest(metric, list(METRICS), 0.6) or closest("automation." + metric, list(METRICS), 0.6)
        raise A44Error(E_ALERT_METRIC, f"unknown metric {metric!r}",
                       hint=(f"did you mean {near}? " if near else "") + f"metrics: {listing(list(METRICS))}")
    return labels


def parse_filter(text: str, labels: tuple[str, ...] | None = None) -> list[Matcher]:
    """`k="v", k!="v"` (empty: every series). `labels`: the metric's, checked with a did-you-mean."""
    out: list[Matcher] = []
    i, n = 0, len(text)

    def fail(msg: str, at: int) -> NoReturn:
        raise A44Error(E_ALERT_FILTER, f"filter column {at + 1}: {msg}",
                       hint='write label="value" or label!="value", separated by commas, e.g. queue="q_invoice_settle"',
                       details={"column": at + 1})

    def skip(j: int) -> int:
        while j < n and text[j] in " \t":
            j += 1
        return j

    i = skip(0)
    if i == n:
        return out
    while True:
        m = _LABEL.match(text, i)
        if not m:
            fail("expected a label name", i)
        label, i = m.group(), skip(m.end())
        if text.startswith("!=", i):
            negate, i = True, i + 2
        elif text.startswith("=", i) and not text.startswith("==", i):
            negate, i = False, i + 1
        else:
            fail(f"expected = or != after {label}", i)
        i = skip(i)
        if i >= n or text[i] != '"':
            fail('expected a value in double quotes', i)
        j, buf = i + 1, []
        while j < n and text[j] != '"':
            if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\':
                j += 1
            buf.append(text[j])
            j += 1
        if j >= n:
            fail("unterminated string", i)
        if labels is not None and label not in labels:
            near = closest(label, list(labels), 0.5)
            raise A44Error(E_ALERT_FILTER, f"unknown label {label!r} in the filter",
                           hint=(f"did you mean {near}? " if near else "")
                           + (f"labels of this metric: {', '.join(labels)}" if labels else "this metric has no labels"))
        out.append(Matcher(label, negate, "".join(buf)))
        i = skip(j + 1)
        if i == n:
            return out
        if text[i] != ",":
            fail("expected a comma between matchers", i)
        i = skip(i + 1)


def parse_condition(text: str) -> Condition:
    """`FUNC(D) OP NUMBER` or `OP NUMBER` (the last value); E_ALERT_CONDITION with a did-you-mean otherwise."""
    s = text.strip()
    hint = "e.g. min_over_time(10m) > 0, rate(5m) >= 0.5, increase(1h) > 10, or > 100 (the last value)"

    def fail(msg: str) -> NoReturn:
        raise A44Error(E_ALERT_CONDITION, f"condition {text[:80]!r}: {msg}", hint=hint)

    function = window = None
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*", s)
    if m and m.group(1) != "last":
        name = m.group(1)
        if name not in FUNCTIONS:
            near = closest(name, list(FUNCTIONS), 0.5)
            raise A44Error(E_ALERT_CONDITION, f"unknown function {name!r}",
                           hint=(f"did you mean {near}? " if near else "") + f"functions: {', '.join(FUNCTIONS)}")
        rest = s[m.end():]
        close = rest.find(")")
        if not rest.startswith("(") or close < 0:
            fail(f"{name} takes a window in parentheses, e.g. {name}(10m)")
        try:
            window = parse_duration(rest[1:close].strip()).total_seconds()
        except ValueError as exc:
            fail(str(exc))
        if window <= 0 or window > MAX_WINDOW_S:
            fail("the window must be more than 0 and at most 7d")
        function, s = name, rest[close + 1:].strip()
    elif m:                                  # `last > 3`: the bare value spelled out
        s = s[m.end():]
    op = next((o for o in OPERATORS if s.startswith(o)), None)
    if op is None:
        fail(f"expected a comparison ({' '.join(OPERATORS)})")
    s = s[len(op):].strip()
    num = _NUMBER.fullmatch(s)
    if not num:
        fail(f"expected a number after {op}")
    value = float(num.group())
    if not math.isfinite(value):
        fail("the threshold must be a finite number")
    return Condition(function, window, op, value)


@dataclass(frozen=True)
class Rule:
    """A checked rule, from `a44 monitor alert create` flags or a `kind: alert` file."""
    name: str
    metric: str
    filter: tuple[Matcher, ...]
    condition: Condition
    severity: str
    notify: str | None
    escalate_to: str | None
    suppress_window_s: float
    update_every: int

    def filter_text(self) -> str:
        return ", ".join(str(m) for m in self.filter)


DEFAULT_WINDOW_S = 600.0
DEFAULT_UPDATE_EVERY = 10


def check_rule(*, name: str, metric: str, filter: str = "", condition: str, severity: str = "p3",
               notify: str | None = None, escalate_to: str | None = None, suppress_window: str | None = None,
               update_every: int | None = None) -> Rule:
    if not isinstance(name, str) or not NAME.match(name):
        raise A44Error(E_ALERT_RULE_INVALID, f"rule name {name!r} is not valid",
                       hint="lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, "
                            "at most 63 characters")
    if name == BUILTIN:
        raise A44Error(E_ALERT_RULE_INVALID, f"{BUILTIN!r} is the built-in alerts' routing, not a rule name",
                       hint="route the built-in alerts with `a44 monitor alert builtin --notify CHANNEL`")
    sev, window, every = check_routing(severity, suppress_window, update_every)
    labels = check_metric(metric)
    return Rule(name, metric, tuple(parse_filter(filter or "", labels)), parse_condition(condition), sev,
                notify or None, escalate_to or None, window, every)


def check_routing(severity: str, suppress_window: str | None, update_every: int | None) -> tuple[str, float, int]:
    """A rule's severity, suppression window (seconds) and update count, defaulted and checked."""
    sev = str(severity).lower()
    if sev not in SEVERITIES:
        near = closest(sev, list(SEVERITIES), 0.3)
        raise A44Error(E_ALERT_RULE_INVALID, f"severity {severity!r} is not one of {', '.join(SEVERITIES)}",
                       hint=f"did you mean {near}?" if near else "p1 is the most urgent")
    try:
        window = parse_duration(suppress_window).total_seconds() if suppress_window else DEFAULT_WINDOW_S
    except ValueError as exc:
        raise A44Error(E_ALERT_RULE_INVALID, f"--suppress-window: {exc}") from None
    if window <= 0:
        raise A44Error(E_ALERT_RULE_INVALID, "the suppression window must be longer than 0")
    every = DEFAULT_UPDATE_EVERY if update_every is None else update_every
    if not isinstance(every, int) or every < 1:
        raise A44Error(E_ALERT_RULE_INVALID, f"--update-every must be a whole number of at least 1, not {every!r}")
    return sev, window, every


# --- evaluation ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    firing: bool | None          # None: not enough samples to say
    value: float | None
    samples: int
    reason: str


def evaluate(cond: Condition, samples: list[tuple[datetime, float]], now: datetime, tolerance_s: float,
             sampled_since: datetime | None = None) -> Verdict:
    """The condition over one series' samples (oldest first). A windowed function needs samples covering its window
    (the oldest within `tolerance_s` of its start): a DLQ that just appeared is not yet "above 0 for 10 minutes".

    A counter series (rate, increase) that appears inside the window while the project was already being sampled
    (`sampled_since`, the oldest sample of any of its series, at or before the window's start) did not exist
    before: it counts from 0 at the window's start. Otherwise a series born with the failure it counts (the
    first failed run of a workflow) is never judged until its window is covered, by when its growth has left it."""
    if cond.function is None:
        if not samples:
            return Verdict(None, None, 0, "no samples yet")
        value = samples[-1][1]
        return Verdict(_compare(value, cond.op, cond.threshold), value, len(samples), "last value")
    assert cond.window_s is not None  # parse_condition gives every windowed function its window
    start = now.timestamp() - cond.window_s
    inside = [(t, v) for t, v in samples if t.timestamp() >= start - tolerance_s and t <= now]
    if (cond.function in ("rate", "increase") and inside and inside[0][0].timestamp() > start + tolerance_s
            and len(inside) == len(samples) and sampled_since is not None
            and sampled_since.timestamp() <= start + tolerance_s):
        inside = [(datetime.fromtimestamp(start, inside[0][0].tzinfo), 0.0), *inside]   # born in the window
    if not inside or inside[0][0].timestamp() > start + tolerance_s:
        covered = 0.0 if not inside else now.timestamp() - inside[0][0].timestamp()
        return Verdict(None, None, len(inside),
                       f"samples cover {format_seconds(round(covered))} of {window_text(cond.window_s)}")
    values = [v for _, v in inside]
    if cond.function == "min_over_time":
        value = min(values)
    elif cond.function == "max_over_time":
        value = max(values)
    elif cond.function == "avg_over_time":
        value = sum(values) / len(values)
    else:
        if len(inside) < 2:
            return Verdict(None, None, len(inside), "rate and increase need two samples")
        grown = sum(b - a if b >= a else b for a, b in zip(values, values[1:]))   # a drop is a counter reset
        span = inside[-1][0].timestamp() - inside[0][0].timestamp()
        value = grown if cond.function == "increase" else (grown / span if span > 0 else 0.0)
    return Verdict(_compare(value, cond.op, cond.threshold), value, len(inside), cond.function)


def _compare(a: float, op: str, b: float) -> bool:
    return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b, "==": a == b, "!=": a != b}[op]
