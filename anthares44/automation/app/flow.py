"""Paused flow keys and open debounce / batch buffers as a Python API (the CLI's `flow` verbs call these; docs/flow.md):

    async with await Automation.connect(project="pj_checkout_prod") as auto:
        f = Flow(auto)
        await f.list()                                                   # the keys paused now
        await f.pause("http:pj_checkout_prod:api.erp.example", until="2026-07-19T15:00:00Z", by="ana",
                      reason="ERP maintenance window")
        await f.resume("http:pj_checkout_prod:api.erp.example", by="ana")  # its waiting runs go now
        await f.buffers("doc-sync")                                      # open debounce / batch buffers
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

from ..errors import E_FLOW_PAUSE_INVALID, A44Error
from ..runtime import flow_pauses as rf
from ..runtime.flow_pauses import paused_on  # noqa: F401 -- the CLI's `logs` names what a run waits on
from .contract.services import FlowService


def instant(value: str | datetime) -> datetime:
    """`--until` as an aware instant: ISO 8601 with a UTC offset (`Z` allowed)."""
    if isinstance(value, datetime):
        when = value
    else:
        try:
            when = datetime.fromisoformat(value.strip())
        except (AttributeError, ValueError):
            raise A44Error(E_FLOW_PAUSE_INVALID, f"--until {str(value)[:64]!r} is not an ISO 8601 instant",
                           hint="write e.g. 2026-07-19T15:00:00Z") from None
    if when.tzinfo is None:
        raise A44Error(E_FLOW_PAUSE_INVALID, f"--until {when.isoformat()} has no UTC offset",
                       hint="write e.g. 2026-07-19T15:00:00Z")
    return when


class Flow(FlowService):
    def __init__(self, auto: Any):
        self.auto = auto
        self.store = auto.store
        self.project = auto.project

    async def list(self) -> builtins.list[dict]:
        return await rf.list_paused(self.store, self.project)

    async def pause(self, key: str, *, until: str | datetime, by: str, reason: str | None = None) -> dict:
        return await rf.pause_key(self.store, self.project, key, instant(until), by=by, reason=reason)

    async def resume(self, key: str, *, by: str) -> dict:
        return await rf.resume_key(self.store, self.project, key, by=by)

    async def buffers(self, workflow: str | None = None) -> builtins.list[dict]:
        """The open debounce / batch buffers (of `workflow`), oldest first (docs/flow.md "Debounce and batch")."""
        from ..runtime.buffers.views import open_buffers
        from .automation import workflow_ref

        return await open_buffers(self.store, self.project, workflow_ref(workflow) if workflow else None)
