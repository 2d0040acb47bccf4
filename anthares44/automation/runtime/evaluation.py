"""Evaluations off the event loop: template rendering and CEL run in a small pool of worker threads, each under a
deadline that the evaluation itself checks as it counts (template budget, CEL cost counter).

A Python thread cannot be killed, so the deadline is what stops it: the Jinja sandbox and the CEL evaluator
read the clock every 1,024 steps and give up once it has passed. The event loop waits a little longer than the
deadline; if the thread has still not answered by then (one long C-level call), the caller gets the timeout
error at once and the thread finishes in the background, bounded by the same limits. Meanwhile the loop keeps
serving every other run: lease renewals, other steps, HTTP requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import E_EXPR_EVAL, E_TEMPLATE_LIMIT, A44Error
from .render import TPL_KEY, render_params

WORKERS = 4
GRACE_S = 0.5                 # how long past its deadline the loop waits for a thread before giving up on it
INGESTION_TIMEOUT_S = 1.0     # a trigger filter or partition key at ingestion: the request must answer

_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="a44-eval")
    return _pool


async def _off_loop(fn: Callable[[], Any], timeout_s: float, late: Callable[[], A44Error]) -> Any:
    fut = asyncio.get_running_loop().run_in_executor(_executor(), fn)
    try:
        return await asyncio.wait_for(fut, timeout_s + GRACE_S)
    except TimeoutError:
        raise late() from None


async def off_loop(fn: Callable[[], Any], timeout_s: float, late: Callable[[], A44Error]) -> Any:
    """`fn` in a worker thread, bounded by `timeout_s` (`late()` when the thread does not answer in time): for a
    caller that evaluates many small programs in one hand-off (a fan-out's keys over every item)."""
    return await _off_loop(fn, timeout_s, late)


def has_templates(params: Any) -> bool:
    if isinstance(params, dict):
        return TPL_KEY in params or any(has_templates(v) for v in params.values())
    if isinstance(params, (list, tuple)):
        return any(has_templates(v) for v in params)
    return False


async def render(params: Any, scope: dict, timeout_s: float) -> Any:
    """`render_params` in a worker thread, bounded by `timeout_s`; E_TEMPLATE / E_TEMPLATE_LIMIT as it raises."""
    if not has_templates(params):
        return params
    deadline = time.monotonic() + timeout_s
    return await _off_loop(lambda: render_params(params, scope, deadline=deadline), timeout_s, lambda: A44Error(
        E_TEMPLATE_LIMIT, f"rendering the parameters did not finish within {timeout_s:g} s (time limit)"))


async def evaluate(program, activation: dict, timeout_s: float) -> Any:
    """`program.evaluate` in a worker thread, bounded by `timeout_s`. Raises EvalError (E_EXPR_COST when the
    deadline passes) or A44Error(E_EXPR_EVAL) when the thread does not answer in time."""
    deadline = time.monotonic() + timeout_s
    return await _off_loop(lambda: program.evaluate(activation, deadline=deadline), timeout_s, lambda: A44Error(
        E_EXPR_EVAL, f"the expression {program.text!r} did not finish within {timeout_s:g} s"))
