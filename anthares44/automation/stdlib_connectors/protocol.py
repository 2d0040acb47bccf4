"""The connector plugin protocol: what the interpreter calls and what a connector may rely on.

A connector is an object with
  * `name: str` — the `uses` value it answers to (`http`, `sql/execute`, or `payments.authorize` for a plugin
    registered under the entry point group `anthares44.automation.connectors`),
  * `params_model` — a pydantic model of its parameters (or None: it takes a free mapping),
  * `async def invoke(self, params, ctx: StepContext) -> JSON value` — performs ONE external effect.
It signals failure by raising `A44Error` with a stable code (retryable or not by code, see errors.py); any other
exception is wrapped as `E_CONNECTOR_FAILED` (permanent) by the interpreter. The interpreter applies the timeout,
records the result and retries; a connector never retries on its own.

Two optional `A44Error.details` keys steer the retry, and win over the code's default: `retryable` (bool; e.g. an
http connector with a custom `retryOn`) and `retry_after_ms` (int; the far side's `Retry-After`, used instead of
the backoff delay). The services the engine injects in `StepContext.services` (the application database, the
event publisher, the breakers' state...) are typed in services.py; a connector reaches nothing else of the
runtime, and never the control store. See docs/connectors.md.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import E_PARAMS_INVALID, A44Error


@dataclass(frozen=True)
class StepContext:
    """What a connector knows about the attempt it serves. `idempotency_key` is `{run_id}:{step_id}` (§2):
    the same for every attempt of the step, so the far side can deduplicate."""

    run_id: str
    step_id: str
    attempt: int
    idempotency_key: str
    project_id: str
    workflow_id: str
    deadline: float                         # time.monotonic() by which the attempt must end
    declared: dict[str, Any] | None = None  # the declared connector instance (`con_...`), as IR, if any
    secrets: Callable[[str], Awaitable[str]] | None = None     # services.SecretLookup
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("a44.connector"))
    services: dict[str, Any] = field(default_factory=dict)  # services.py: app database, publisher, clock...
    # values this attempt derived from secrets (an OAuth access token): scrubbed like the secrets themselves;
    # one set per attempt, shared by the copies `dataclasses.replace` makes of the context
    concealed: set[str] = field(default_factory=set)

    async def secret(self, ref: str) -> str:
        if self.secrets is None:
            raise A44Error(E_PARAMS_INVALID, f"secret {ref!r} requested but no secret source is configured")
        return await self.secrets(ref)

    def conceal(self, value: str) -> None:
        """Treat `value` as a secret for this attempt: scrubbed from its result, its error and its log lines."""
        if isinstance(value, str) and value:
            self.concealed.add(value)


@runtime_checkable
class Connector(Protocol):
    name: str
    params_model: Any

    async def invoke(self, params: Any, ctx: StepContext) -> Any: ...
