"""The outcome of one send (delivered, retry later, refused for good) as every sender answers it, and the secret
lookup senders are given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ...errors import E_NOTIFY_REFUSED, E_NOTIFY_UNAVAILABLE, A44Error

MAX_ERROR = 500        # characters of an error kept in last_error


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    retry: bool = False             # not delivered: worth another attempt
    error: str | None = None        # `E_CODE message`, as kept in last_error
    retry_after: float | None = None

    @classmethod
    def ok(cls) -> Outcome:
        return cls(True)

    @classmethod
    def later(cls, message: str, retry_after: float | None = None) -> Outcome:
        return cls(False, True, f"{E_NOTIFY_UNAVAILABLE} {message}"[:MAX_ERROR], retry_after)

    @classmethod
    def refused(cls, message: str) -> Outcome:
        return cls(False, False, f"{E_NOTIFY_REFUSED} {message}"[:MAX_ERROR])

    @classmethod
    def of_error(cls, exc: A44Error) -> Outcome:
        """A coded error before anything was sent (a secret not defined): retried, it may be defined later."""
        return cls(False, True, f"{exc.code} {exc.message}"[:MAX_ERROR])


Secrets = Callable[[str], Awaitable[str]]
