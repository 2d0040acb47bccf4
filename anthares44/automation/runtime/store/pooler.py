"""Pooler detection: whether a URL reaches PostgreSQL through a transaction pooler (PgBouncer with
`pool_mode = transaction` or `statement`, as managed PostgreSQL is often reached), and what a44 does about it.

Through such a pooler each transaction may run on another server backend, so what outlives a transaction breaks:
asyncpg's named prepared statements (PgBouncer < 1.21, or >= 1.21 without `max_prepared_statements`: "prepared
statement __asyncpg_stmt_N__ does not exist"), LISTEN (the notifications go to a backend the daemon no longer
holds), session advisory locks (the migration lock, the log-retention lock: taken on one backend, "released" on
another, held forever) and session `SET`s. So a pool on such a URL runs without a statement cache (each statement
parsed again: one more round trip), and the session work goes to the session URL (`A44_DATABASE_SESSION_URL`, a
connection that bypasses the pooler); without one it is refused with E_DB_POOLER (docs/store.md).

The probe (`probe`), once per server address and process: a pooler answers the startup with a backend key of its
own, so the pid asyncpg was told differs from `pg_backend_pid()`; then, to tell session pooling (harmless) from
transaction pooling, a second client opens a transaction right after the first one's statement: a transaction
pooler hands it the backend the first just released (PgBouncer reuses servers last-in first-out), or the first
client's next statement meets another backend. Both mean "transaction pooled"; a session (direct or session
pooled) never changes backend.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from ...errors import E_DB_POOLER, A44Error
from ...redact import redact_url
from .session import Session

log = logging.getLogger("a44.lifecycle")
SESSION_SETTING = "A44_DATABASE_SESSION_URL"


@dataclass(frozen=True)
class Pooling:
    """What the probe found about one URL."""
    proxied: bool = False          # something between a44 and PostgreSQL answers the startup (a pooler)
    transaction: bool = False      # ... and hands a client another backend between transactions

    @property
    def server_settings(self) -> dict[str, str]:
        """The startup parameters of a44's sessions. `jit = off`: a44's statements are short OLTP ones, and a
        server built with LLVM (Debian's, most managed ones) JIT-compiles those the planner overestimates, which
        made the runtime tests ~20x slower on Debian's PostgreSQL 15. A pooler may refuse a startup parameter it
        does not know (PgBouncer does): through one, the operator sets it (`alter role a44 set jit = off`)."""
        if self.proxied:
            return {"application_name": "a44"}
        return {"application_name": "a44", "jit": "off"}

    @property
    def statement_cache_size(self) -> int:
        """asyncpg's per-connection statement cache for a pool on this URL (0: unnamed statements only)."""
        return 0 if self.transaction else 100


DIRECT = Pooling()
_PROBED: dict[tuple[str | None, int | None, str | None], Pooling] = {}


def _endpoint(url: str) -> tuple[str | None, int | None, str | None]:
    parts = urlsplit(url)
    return parts.hostname, parts.port, parts.username


def session_url_of(url: str, session_url: str | None) -> str | None:
    """The session URL for the control store `url`: `session_url` as given, with `url`'s database when it names
    none (`postgresql://a44@db-direct:5432` reaches the same database past the pooler); None when unset."""
    if not session_url:
        return None
    parts = urlsplit(session_url)
    if parts.path.strip("/"):
        return session_url
    return urlunsplit(parts._replace(path=urlsplit(url).path))


async def probe(url: str, *, timeout: float = 10) -> Pooling:
    """How `url` reaches PostgreSQL (cached per host, port and user for the life of the process)."""
    key = _endpoint(url)
    got = _PROBED.get(key)
    if got is None:
        got = _PROBED[key] = await _probe(url, timeout)
    return got


def forget() -> None:
    """Drop the cached probes (a test that replaces the server behind an address)."""
    _PROBED.clear()


async def _probe(url: str, timeout: float) -> Pooling:
    first = await asyncpg.connect(url, statement_cache_size=0, timeout=timeout)
    try:
        pid = await Session(first).fetchval("pooler_backend_pid")
        if first.get_server_pid() == pid:
            return DIRECT
        second = await asyncpg.connect(url, statement_cache_size=0, timeout=timeout)
        try:
            async with second.transaction():
                other = await Session(second).fetchval("pooler_backend_pid")
                again = await Session(first).fetchval("pooler_backend_pid")
        finally:
            await second.close()
        return Pooling(proxied=True, transaction=other == pid or again != pid)
    finally:
        await asyncio.shield(first.close())


async def _jit_on(url: str, timeout: float) -> bool:
    conn = await asyncpg.connect(url, statement_cache_size=0, timeout=timeout)
    try:
        return bool(await Session(conn).fetchval("pooler_jit_on"))
    finally:
        await asyncio.shield(conn.close())


def refuse(url: str, what: str) -> A44Error:
    """E_DB_POOLER: `what` needs a session and `url` is transaction pooled."""
    return A44Error(E_DB_POOLER, f"{what}: a session connection is needed, and {redact_url(url)} goes through a "
                                 f"transaction pooler (PgBouncer pool_mode=transaction?): each transaction may run "
                                 f"on another server backend",
                    hint=f"set {SESSION_SETTING} to a URL that bypasses the pooler (the server itself, or a "
                         f"pool_mode=session pool), e.g. postgresql://a44@db-host:5432; docs/store.md")


async def check_session(url: str, session_url: str | None, *, timeout: float = 10) -> Pooling:
    """The start-up check of a daemon: its LISTEN and session locks need a session; E_DB_POOLER when the URL
    they would use is transaction pooled. A transaction-pooled store URL with a session URL beside it works
    degraded (no statement cache): a warning. Returns the store URL's pooling."""
    pooling = await probe(url, timeout=timeout)
    target = session_url or url
    if session_url is not None and (await probe(session_url, timeout=timeout)).transaction:
        raise refuse(session_url, f"{SESSION_SETTING} (LISTEN/NOTIFY, the migration and retention locks)")
    if session_url is None and pooling.transaction:
        raise refuse(target, "the daemon's LISTEN/NOTIFY wake-ups and session advisory locks")
    if pooling.proxied and await _jit_on(url, timeout):
        log.warning("%s goes through a pooler and JIT is on there: a44's statements run much slower with it; "
                    "`alter role <a44's role> set jit = off` (docs/store.md)", redact_url(url))
    if pooling.transaction:
        log.warning("%s goes through a transaction pooler: prepared statements are not cached (each statement is "
                    "parsed again); LISTEN and session locks use %s", redact_url(url), redact_url(target))
    return pooling
