"""`a44 automation schedule preview`: the firings of the schedule triggers in some files over a window, computed
exactly as the scheduler computes them (occurrences.firings), before anything is published."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .occurrences import Firing, firings, zone


@dataclass(frozen=True)
class SchedulePreview:
    trigger: object          # TriggerIR
    start: datetime
    end: datetime
    firings: list[Firing]

    def to_dict(self) -> dict:
        t = self.trigger
        return {"trigger_id": t.id, "workflow_id": t.workflow_id, "cron": t.cron, "tz": t.tz,
                "dst_policy": t.dst_policy, "overlap": t.overlap,
                "from": self.start.isoformat(), "to": self.end.isoformat(),
                "firings": [f.to_dict(t.id) for f in self.firings]}


def schedule_triggers(irs: dict) -> list:
    """Schedule TriggerIRs of a compile result: standalone trigger files and workflows' inline `cron` triggers."""
    from ...compiler.ir import TriggerIR, WorkflowIR

    out = []
    for ir in irs.values():
        if isinstance(ir, WorkflowIR):
            out.extend(t for t in ir.triggers if t.type == "schedule")
        elif isinstance(ir, TriggerIR) and ir.type == "schedule":
            out.append(ir)
    return sorted(out, key=lambda t: t.id)


def parse_bound(text: str, tz_name: str) -> datetime:
    """An ISO instant; without an offset (or a bare date) it is local time in the trigger's zone."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone(tz_name))
    return value


def preview(trigger, start_text: str, end_text: str) -> SchedulePreview:
    start, end = parse_bound(start_text, trigger.tz), parse_bound(end_text, trigger.tz)
    return SchedulePreview(trigger, start, end,
                           firings(trigger.cron, trigger.tz, trigger.dst_policy or "skip-nonexistent", start, end))


def flags(f: Firing) -> str:
    if f.shifted:
        return f"shifted (nominal {f.nominal:%H:%M} does not exist)"
    if f.second_instant:
        return f"second instant of {f.nominal:%H:%M}"
    return ""


def render_text(previews: list[SchedulePreview]) -> str:
    lines = []
    for p in previews:
        t = p.trigger
        lines.append(f"{t.id}  cron \"{t.cron}\"  tz {t.tz}  dstPolicy {t.dst_policy}  "
                     f"[{p.start.isoformat()} .. {p.end.isoformat()})  {len(p.firings)} firing(s)")
        if p.firings:
            width = max(len(f.key(t.id)) for f in p.firings)
            lines.append(f"  {'UTC':<20}  {'local':<25}  {'occurrence key':<{width}}  flags")
        for f in p.firings:
            lines.append(f"  {f.to_dict()['instant_utc']:<20}  {f.occurrence_iso:<25}  {f.key(t.id):<{width}}  "
                         f"{flags(f)}".rstrip())
        lines.append("")
    return "\n".join(lines)
