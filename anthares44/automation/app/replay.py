"""Replay (§13) as an application function, shared by the CLI (`a44 automation replay`) and embedders.

    async with await Automation.connect() as auto:
        doc = await replay(auto, state="failed", step="provision-db", since="48h", from_step="provision-db",
                           dry_run=True)            # the manual's JSON document, nothing written
        res = await replay(auto, state="failed", step="provision-db", since="48h", from_step="provision-db",
                           rate=10)                 # runs become pending; the daemons run them

See `runtime/replay` for how an epoch is opened and why re-running the same call replays nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ..durations import parse_duration, parse_rate
from .automation import InvalidArgument, workflow_ref


def parse_instant(text: str | datetime, now: datetime) -> datetime:
    """An ISO 8601 instant (`2026-07-19T14:00:00Z`), or an age (`2h`: two hours before now)."""
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    except ValueError:
        pass
    try:
        return now - parse_duration(text)
    except ValueError:
        raise InvalidArgument(f"bad instant {text!r}", hint="ISO 8601 (2026-07-19T14:00:00Z) or an age (2h)") from None


async def replay(auto, run_ids=(), *, state: str | None = None, step: str | None = None,
                 since: str | None = None, workflow: str | None = None, from_step: str | None = None,
                 from_time: str | datetime | None = None, failed_partitions: bool = False,
                 to_version: int | None = None, dry_run: bool = False,
                 rate: str | float | None = None, concurrency: int = 16, request_id: str | None = None,
                 progress: Callable[[int, int], None] | None = None) -> dict:
    """Dry run: the manual's document (`matched`, `fromStep`, `perRun`, `estimatedDurationSeconds`,
    `warnings`). Otherwise the same document plus `requestId`, `replayed` and `skipped` counts and the runs."""
    from ..runtime.replay import Cut, Selection, apply, prepare
    from ..runtime.store.core import RUN_STATES

    if not run_ids and not any((state, step, since, workflow)):
        raise InvalidArgument("select runs: RUN ids, or --state / --step / --since / --workflow")
    if state is not None and state not in RUN_STATES:
        raise InvalidArgument(f"unknown run state {state!r}", hint=f"known states: {', '.join(RUN_STATES)}")
    if (from_step is not None) + (from_time is not None) + bool(failed_partitions) != 1:
        raise InvalidArgument("give exactly one cut: --from-step S, --from-time T or --failed-partitions")
    now = auto.store.clock.now()
    since_at = None
    if since is not None:
        try:
            since_at = now - parse_duration(since)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    sel = Selection(tuple(run_ids), state, step, str(since) if since is not None else None, since_at,
                    workflow_ref(workflow) if workflow else None)
    cut = Cut(from_step, parse_instant(from_time, now) if from_time is not None else None, bool(failed_partitions))
    try:
        per_second = parse_rate(rate)
    except ValueError as exc:
        raise InvalidArgument(str(exc), hint="e.g. --rate 10/s or --rate 600/min") from None
    plan = await prepare(auto.store, auto.project, sel, cut, to_version=to_version, concurrency=concurrency,
                         rate=per_second, request=request_id)
    doc = plan.to_dict()
    if dry_run:
        return doc
    result = await apply(auto.store, plan, rate=per_second, progress=progress)
    doc.update(result.to_dict())
    return doc
