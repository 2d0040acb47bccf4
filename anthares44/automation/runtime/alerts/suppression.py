"""The suppression state machine of one alert (docs/alerts.md "Suppression"), pure and clock-driven: no I/O, the
caller passes `now` and stores the state it gets back with the messages, in one transaction.

The second seed's rule: the same workflow and error code within the window send the first alert (`firing`), then
one `update` every `update_every` occurrences with the count, never one message per failure. When the window ends
and the alert has not cleared, it `escalation`s once to the escalation channel (the rule's channel when it has
none) at severity p1, and later updates go there too: suppression never becomes silence. Clearing (a success, the
condition no longer true) sends `resolved` to the channel, and to the escalation channel when it escalated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Policy:
    channel: str | None          # None: recorded and logged, sent nowhere
    escalate_to: str | None
    severity: str
    window_s: float
    update_every: int


@dataclass(frozen=True)
class State:
    opened_at: str               # ISO 8601 (the state is stored as JSON)
    count: int = 0               # occurrences since the alert opened
    notified: int = 0            # the count the last firing/update message carried
    seq: int = 0                 # messages decided so far: part of each one's idempotency key
    escalated: bool = False
    resolved: bool = False

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> State:
        return cls(**doc)

    def window_ends_at(self, policy: Policy) -> datetime:
        return datetime.fromisoformat(self.opened_at) + timedelta(seconds=policy.window_s)


@dataclass(frozen=True)
class Message:
    kind: str                    # firing | update | escalation | resolved
    channel: str | None
    severity: str
    count: int
    seq: int

    def key(self, alert_id: str) -> str:
        """The idempotency key: the same decision made twice (a retry after a crash) is one row."""
        return f"{alert_id}/{self.seq}/{self.kind}/{self.channel}"


def open_alert(policy: Policy, now: datetime, n: int = 1) -> tuple[State, list[Message]]:
    state = State(opened_at=now.isoformat(), count=n, notified=n, seq=1)
    return state, [Message("firing", policy.channel, policy.severity, n, 1)]


def occur(state: State, policy: Policy, now: datetime, n: int = 1) -> tuple[State, list[Message]]:
    """`n` more occurrences at `now` (a batch crossing several multiples of `update_every` sends one update)."""
    state = replace(state, count=state.count + n)
    out: list[Message] = []
    if state.count - state.notified >= policy.update_every:
        state = replace(state, notified=state.count, seq=state.seq + 1)
        channel, severity = _target(state, policy)
        out.append(Message("update", channel, severity, state.count, state.seq))
    state, more = tick(state, policy, now)
    return state, out + more


def tick(state: State, policy: Policy, now: datetime) -> tuple[State, list[Message]]:
    """Time passing: the escalation once the window has ended without the alert clearing."""
    if state.resolved or state.escalated or now < state.window_ends_at(policy):
        return state, []
    state = replace(state, escalated=True, seq=state.seq + 1)
    return state, [Message("escalation", policy.escalate_to or policy.channel, "p1", state.count, state.seq)]


def clear(state: State, policy: Policy, now: datetime) -> tuple[State, list[Message]]:
    if state.resolved:
        return state, []
    state = replace(state, resolved=True, seq=state.seq + 1)
    out = [Message("resolved", policy.channel, policy.severity, state.count, state.seq)]
    if state.escalated and policy.escalate_to and policy.escalate_to != policy.channel:
        out.append(Message("resolved", policy.escalate_to, "p1", state.count, state.seq))
    return state, out


def _target(state: State, policy: Policy) -> tuple[str | None, str]:
    if state.escalated:
        return policy.escalate_to or policy.channel, "p1"
    return policy.channel, policy.severity
