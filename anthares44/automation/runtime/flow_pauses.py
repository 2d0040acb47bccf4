"""Paused flow keys as operators see them (§22, docs/flow.md): list the keys paused now, pause one by hand until an
instant, resume one. An upstream 429 pauses keys on its own (stdlib_connectors/pauses.py, through
connector_services.StorePauses); these are the same rows of `automation.flow_pauses`.

Who paused or resumed a key, and why, stays on its row (`paused_by`, `reason`, `resumed_by`) and in a WARNING log
line. Resuming a key, or pausing it to an earlier end, also wakes the runs released until the old end (their
waiting attempt names the key: pauses.marker), so they go at once instead of at the end they were given.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from typing import Any

from ..compiler.models.params import RATE_KEY_PATTERN
from ..errors import E_FLOW_KEY_NOT_FOUND, E_FLOW_PAUSE_INVALID, E_UPSTREAM_429, A44Error
from ..stdlib_connectors.pauses import PAUSE_PREFIX, key_marker
from .store.core import Store

log = logging.getLogger("a44.flow")

MAX_OPERATOR_PAUSE = timedelta(days=30)


def _check_key(key: str) -> None:
    if not isinstance(key, str) or re.fullmatch(RATE_KEY_PATTERN, key) is None:
        raise A44Error(E_FLOW_PAUSE_INVALID, f"{str(key)[:200]!r} is not a flow key",
                       hint="a flow key is 1-200 of A-Z a-z 0-9 _ . : / @ -, e.g. http:pj_default:api.example.com "
                            "(`flow list` shows the paused ones)")


def _doc(row: Any, now: datetime) -> dict[str, Any]:
    d = dict(row)
    d["paused"] = d["paused_until"] > now
    return d


async def list_paused(store: Store, project_id: str) -> list[dict[str, Any]]:
    """The keys of the project paused now, the soonest to end first."""
    now = store.clock.now()
    return [_doc(r, now) for r in await store.fetch("flow_list", project_id=project_id, now=now)]


async def pause_key(store: Store, project_id: str, key: str, until: datetime, *, by: str,
                    reason: str | None = None) -> dict[str, Any]:
    """Pause `key` until `until` (an aware instant in the future, at most 30 days ahead), whatever pause it had;
    answers its row
    with `woken`: runs that were released until a later end and now go at `until`."""
    _check_key(key)
    now = store.clock.now()
    if until <= now or until > now + MAX_OPERATOR_PAUSE:
        raise A44Error(E_FLOW_PAUSE_INVALID, f"--until {until.isoformat()} is not within the next 30 days "
                                             f"(now is {now.isoformat()})")
    async with store.transaction("flow_pause") as tx:
        row = await tx.fetchrow("flow_pause_operator", project_id=project_id, key=key, now=now, until=until,
                                reason=reason, who=by)
        woken = await tx.fetchval("flow_wake", project_id=project_id, marker=key_marker(key), at=until)
    log.warning("flow %s/%s: paused until %s by %s%s", project_id, key, until.isoformat(), by,
                f" ({reason})" if reason else "")
    return {**_doc(row, now), "woken": woken}


async def resume_key(store: Store, project_id: str, key: str, *, by: str) -> dict[str, Any]:
    """End `key`'s pause now; answers its row with `woken`: the runs released until its end, due now.
    E_FLOW_KEY_NOT_FOUND when the key is not paused."""
    _check_key(key)
    now = store.clock.now()
    async with store.transaction("flow_resume") as tx:
        row = await tx.fetchrow("flow_resume", project_id=project_id, key=key, now=now, who=by)
        if row is None:
            raise A44Error(E_FLOW_KEY_NOT_FOUND, f"flow key {key!r} is not paused in {project_id}",
                           hint="`a44 automation flow list` shows the paused keys")
        woken = await tx.fetchval("flow_wake", project_id=project_id, marker=key_marker(key), at=now)
    log.warning("flow %s/%s: resumed by %s, %d waiting runs woken", project_id, key, by, woken)
    return {**_doc(row, now), "woken": woken}


def paused_on(run: dict, attempts: list[dict]) -> str | None:
    """What a waiting run waits on when that is a paused flow key: `flow key K paused until T`, from its last
    attempt (pauses.marker); None otherwise."""
    if run.get("state") != "waiting" or not attempts:
        return None
    last = max(attempts, key=lambda a: a["started_at"])
    message = last.get("error_message") or ""
    if last.get("error_code") != E_UPSTREAM_429 or PAUSE_PREFIX not in message:
        return None
    return message[message.index(PAUSE_PREFIX):]
