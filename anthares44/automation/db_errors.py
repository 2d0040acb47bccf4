"""Translation of asyncpg / socket errors into `A44Error`, for the two kinds of database a44 talks to: the control
store (runtime/store/core.py: no driver exception leaves it) and a workflow's own database (sql/execute).

Unique violations map to a specific code by constraint name (the caller's `constraints`); connection failures of every
kind become E_DB_UNAVAILABLE (retryable); a missing schema becomes E_DB_SCHEMA; anything else E_DB with the
SQLSTATE, so a user can search for it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping

import asyncpg

from .errors import E_DB, E_DB_SCHEMA, E_DB_UNAVAILABLE, A44Error
from .redact import redact_url

_UNAVAILABLE = (
    OSError,  # refused, unreachable, DNS (socket.gaierror is an OSError)
    asyncio.TimeoutError,
    TimeoutError,
    asyncpg.PostgresConnectionError,  # includes CannotConnectNowError, ConnectionDoesNotExistError
    asyncpg.ConnectionFailureError,
    asyncpg.InvalidCatalogNameError,  # the database in the URL does not exist
    asyncpg.InvalidAuthorizationSpecificationError,  # includes InvalidPasswordError
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
)


def translate(exc: BaseException, *, operation: str, url: str | None = None,
              constraints: Mapping[str, tuple[str, str]] | None = None) -> A44Error | None:
    """The A44Error for a driver failure, or None if `exc` is not a database failure (re-raise it as is)."""
    if isinstance(exc, A44Error):
        return exc
    where = f" at {redact_url(url)}" if url else ""
    if isinstance(exc, _UNAVAILABLE):
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, socket.gaierror):
            reason = f"host name not resolved ({exc})"
        elif isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            reason = "timed out"
        return A44Error(E_DB_UNAVAILABLE, f"cannot reach PostgreSQL{where} during {operation}: {reason}",
                        hint="check A44_DATABASE_URL (or unset it to use the embedded server) and "
                             "`a44 automation db status`")
    if isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc):
        return A44Error(E_DB_UNAVAILABLE, f"the connection to PostgreSQL{where} was lost during {operation}: {exc}")
    if isinstance(exc, (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError, asyncpg.UndefinedFunctionError)):
        return A44Error(E_DB_SCHEMA, f"{operation}: {exc}", hint="run `a44 automation db migrate`")
    if isinstance(exc, asyncpg.UniqueViolationError):
        mapped = (constraints or {}).get(exc.constraint_name or "")
        if mapped:
            return A44Error(mapped[0], mapped[1], details={"constraint": exc.constraint_name})
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", None) or "?"
        return A44Error(E_DB, f"{operation} failed: {exc} (SQLSTATE {state})",
                        details={"sqlstate": state, "constraint": getattr(exc, "constraint_name", None)})
    if isinstance(exc, asyncpg.InterfaceError):
        return A44Error(E_DB, f"{operation} failed: {exc}")
    return None
