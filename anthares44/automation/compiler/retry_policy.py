"""Retry and compensation timing (§3.2, §6.1, §6.3): whether a failed attempt is tried again and after how long.

Pure functions of the IR policy, the attempt history and an injected RNG, so tests check the jitter bounds
exactly and the interpreter turns the delay into a due time in the database (never a sleep in memory). Below both
the runtime and the sdk, which apply the same rules to DAG steps and to code steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import FREE_RETRY_CODES, A44Error
from .ir import RetryIR


@dataclass(frozen=True)
class Failure:
    code: str
    message: str
    retryable: bool
    retry_after_ms: int | None = None

    @classmethod
    def of(cls, err: A44Error) -> Failure:
        # a connector that knows better than the code's default says so in details (§6.3, 429 Retry-After)
        retryable = err.details.get("retryable", err.retryable)
        after = err.details.get("retry_after_ms")
        return cls(err.code, err.message, bool(retryable), int(after) if after is not None else None)


def backoff_ms(retry: RetryIR, failed_attempts: int, rng: random.Random) -> float:
    """Delay before the next attempt after `failed_attempts` (n >= 1) counted failures. Full jitter: uniform in
    [0, min(base * 2^(n-1), cap)]."""
    if retry.strategy == "fixed":
        return float(retry.base_ms)
    ceiling = min(retry.base_ms * 2 ** (failed_attempts - 1), retry.cap_ms)
    return rng.uniform(0, ceiling)


def retry_delay_ms(retry: RetryIR, failed_attempts: int, failure: Failure, rng: random.Random) -> float | None:
    """None when the failure is final: permanent, or the budget (`max` retries after the first attempt) spent.
    An open circuit and an upstream 429 (a paused flow key, §22) are retried without consuming budget, after the
    time the failure names."""
    if not failure.retryable:
        return None
    if failure.code not in FREE_RETRY_CODES and (retry.strategy == "none" or failed_attempts > retry.max):
        return None
    if failure.retry_after_ms is not None:
        return float(failure.retry_after_ms)
    return backoff_ms(retry, max(failed_attempts, 1), rng)


def compensation_delay_ms(delays_ms: tuple[int, ...], attempt: int) -> int:
    """§6.1: compensation attempt k (1-based) waits delays_ms[k-1] (5 s, 20 s, 60 s) after the previous event
    (the final failure, the previous compensation, or its own failed attempt k-1)."""
    return delays_ms[min(attempt, len(delays_ms)) - 1]
