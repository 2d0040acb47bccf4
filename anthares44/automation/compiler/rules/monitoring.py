"""Alert rule and channel files (docs/alerts.md): a rule's metric, filter and condition by the rules of
`a44 monitor alert create` (grammar/alert_rules.py), names unique across the files, and the channels a rule names
declared in them (a warning: the channel may exist in the project already; publish checks the store)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, Severity, register
from ...errors import E_ALERT_CONDITION, E_ALERT_FILTER, E_ALERT_METRIC, A44Error
from ...grammar.alert_rules import check_rule
from ..models.types import format_duration

if TYPE_CHECKING:
    from ..documents import Decl
    from ..models import AlertRule
    from ..project import Project

A44701 = register("A44701", "alert rule names an unknown metric")
A44702 = register("A44702", "alert rule filter does not parse or names an unknown label")
A44703 = register("A44703", "alert rule condition does not parse")
A44704 = register("A44704", "alert rule name or routing is not valid")
A44705 = register("A44705", "alert rule notifies a channel the files do not declare", Severity.WARNING)
A44706 = register("A44706", "two alert rules or two channels with one name")

_FIELD = {E_ALERT_METRIC: (A44701, "metric"), E_ALERT_FILTER: (A44702, "filter"),
          E_ALERT_CONDITION: (A44703, "condition")}


def check(project: Project) -> Iterator[Diagnostic]:
    seen: dict[tuple[str, str], object] = {}
    for kind, key in (("alert", "name"), ("channel", "id")):
        for decl in project.of_kind(kind):
            name = getattr(decl.model, key)
            if (kind, name) in seen:
                yield Diagnostic.at(A44706, f"{kind} {name!r} is declared twice (also in {seen[(kind, name)]})",
                                    decl.src.path, decl.src.span(decl.path + (key,)), hint="rename one of them")
            seen[(kind, name)] = decl.src.path
    channels = {d.model.id for d in project.of_kind("channel")}
    for decl in project.of_kind("alert"):
        yield from _rule(decl, channels)


def _rule(decl: Decl[AlertRule], channels: set[str]) -> Iterator[Diagnostic]:
    m, src = decl.model, decl.src
    try:
        check_rule(name=m.name, metric=m.metric, filter=m.filter, condition=m.condition, severity=m.severity,
                   notify=m.notify, escalate_to=m.escalateTo,
                   suppress_window=format_duration(m.suppressWindow) if m.suppressWindow else None,
                   update_every=m.updateEvery)
    except A44Error as exc:
        code, field = _FIELD.get(exc.code, (A44704, "name"))
        yield Diagnostic.at(code, exc.message, src.path, src.span(decl.path + (field,)), hint=exc.hint)
        return
    for field, channel in (("notify", m.notify), ("escalateTo", m.escalateTo)):
        if channel and channel not in channels:
            yield Diagnostic.at(A44705, f"channel {channel!r} is not declared in these files", src.path,
                                src.span(decl.path + (field,)),
                                hint="publish fails unless the project has it (`a44 monitor channel list`)")
