"""Flow control (§22, docs/flow.md): the paused flow keys, pausing one by hand, resuming one; the open debounce
and batch buffers."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .common import Body, Doc, Text

FlowKeyName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:/@-]{1,200}$",
                                   description="a flow key, e.g. http:pj_default:api.example.com")]


class FlowKeys(Doc):
    keys: list[dict] = Field(description="the keys paused now, the soonest to end first: key, paused_until, source "
                                         "(upstream | operator), reason, paused_by, paused_at, paused_count, "
                                         "paused")


class FlowPauseRequest(Body):
    key: FlowKeyName
    until: Annotated[str, Field(min_length=1, max_length=64, description="ISO 8601 instant with a UTC offset, "
                                                                          "within the next 30 days")]
    reason: Text | None = None


class FlowResumeRequest(Body):
    key: FlowKeyName


class FlowChange(Doc):
    key: str
    paused_until: str
    paused: bool
    woken: int = Field(description="runs released until a later end that go now (resume) or at `until` (pause)")


class RunExplain(Doc):
    """What holds a run back (`runs explain RUN`): each limit of the run with its key, its use now, whether it is
    full, since when the run waits behind it, its oldest holder, the run's position among the key's waiting runs,
    a throttle's next token, and a pause of a flow key it waits on."""
    run_id: str
    state: str
    workflow_id: str
    held_back: bool = Field(description="true when a full limit or a pause keeps it from starting now")
    limits: list[dict] = Field(description="kind (concurrency | fairness | throttle | queue | workflow), key, use "
                                           "(`input.tenant=acme 5/5`), in_use, limit, full, since, oldest_holder "
                                           "{run_id, since}, position, tokens, next_token_at")
    pause: dict | None = Field(None, description="the paused flow key it waits on: key, until, reason, source")


class FlowBuffers(Doc):
    buffers: list[dict] = Field(description="the open debounce / batch buffers, oldest first: buffer_id, "
                                            "workflow_id, kind, key, deliver, events, bytes, first_at, last_at, "
                                            "due_at, due_for (quiet | maxWait)")
