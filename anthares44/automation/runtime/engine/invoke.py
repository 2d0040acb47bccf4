"""One attempt of one connector call: render the parameters (off the event loop, bounded: runtime/evaluation.py),
validate them, invoke under what is left of the step timeout, and
turn whatever happened into an `Outcome`. Nothing here writes to the database; the interpreter records it."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...attempts import failed_status
from ...compiler.ir import ConnectorRef
from ...errors import E_CONNECTOR_FAILED, E_STEP_TIMEOUT, A44Error
from ...stdlib_connectors.protocol import StepContext
from ...stdlib_connectors.registry import ConnectorRegistry, validate_params
from .. import evaluation
from ..store.results import check_storable

log = logging.getLogger("a44.engine")
AFTER_EFFECT = "fault.after_effect_before_record"    # a service key only the test kit sets


@dataclass
class Outcome:
    status: str                 # succeeded | failed | timeout
    result: Any = None
    error: A44Error | None = None
    seq: int = 0                # order of ending among a run's concurrent attempts
    rows: dict | None = None    # the row counts the step reported (engine/rows.py)


@dataclass(frozen=True)
class Call:
    """What to invoke: the step's (or its compensation's) connector, raw IR params and timeout."""
    step_id: str
    connector: ConnectorRef
    params: dict
    timeout_ms: int
    attempt: int
    kind: str = "action"


async def invoke(registry: ConnectorRegistry, call: Call, scope: Callable[[], dict], *, run_id: str,
                 project_id: str, workflow_id: str, idempotency_key: str, services: dict) -> Outcome:
    """`scope()` makes the template scope; it is called only when the parameters hold a template."""
    timeout_s = max(call.timeout_ms, 1) / 1000
    deadline = time.monotonic() + timeout_s
    try:
        connector = registry.get(call.connector)
        params = call.params
        if evaluation.has_templates(params):
            # rendering runs off the event loop and spends the step's own timeout: the connector gets the rest
            params = await evaluation.render(params, scope(), timeout_s)
        params = validate_params(connector, params)
    except A44Error as err:
        return Outcome("failed", error=_with_step(err, call.step_id))
    timeout_s = max(deadline - time.monotonic(), 0.001)
    ctx = StepContext(run_id=run_id, step_id=call.step_id, attempt=call.attempt, idempotency_key=idempotency_key,
                      project_id=project_id, workflow_id=workflow_id, deadline=deadline,
                      declared=call.connector.config or registry.declared(call.connector.uses),
                      services=services, logger=_logger(connector.name))
    try:
        async with asyncio.timeout(timeout_s) as cm:
            result = await registry.call(connector, params, ctx)  # secrets, circuit breaker, scrubbing
    except TimeoutError as exc:
        if cm.expired():
            return Outcome("timeout", error=A44Error(E_STEP_TIMEOUT, f"step {call.step_id} did not finish within "
                                                                       f"{call.timeout_ms} ms", step_id=call.step_id))
        return Outcome("failed", error=_unexpected(call, exc))
    except A44Error as err:     # a connector that saw its deadline pass first raises E_STEP_TIMEOUT: a timeout
        return Outcome(failed_status(err.code), error=_with_step(err, call.step_id))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a connector bug fails the step, never the worker
        return Outcome("failed", error=_unexpected(call, exc))
    fault = services.get(AFTER_EFFECT)   # the test kit's fault point (testkit/faults.py); absent in production
    if fault is not None:
        fault(ctx)      # may raise: the visit dies as a worker would, the effect done and nothing recorded
    try:
        check_storable(result)
    except A44Error as err:     # left to the commit, it would abort every visit: the call repeated at each lease
        return Outcome("failed", error=_with_step(err, call.step_id))
    return Outcome("succeeded", result=result)


@functools.lru_cache(maxsize=256)
def _logger(name: str) -> logging.Logger:
    """`a44.connector.<name>`: logging.getLogger takes the logging module's lock on every call."""
    return logging.getLogger(f"a44.connector.{name}")


def _with_step(err: A44Error, step_id: str) -> A44Error:
    if err.step_id is None:
        err.step_id = step_id
    return err


def _unexpected(call: Call, exc: BaseException) -> A44Error:
    log.debug("connector %s raised", call.connector.uses, exc_info=exc)
    return A44Error(E_CONNECTOR_FAILED, f"connector {call.connector.uses!r} raised {type(exc).__name__}: {exc}",
                    step_id=call.step_id)
