"""The plugin's local effect: a SQLite ledger of payment holds, keyed by the step's idempotency key.

Each operation is one transaction; `authorize` inserts with `on conflict (idempotency_key) do nothing` and
reads the row back, so concurrent or repeated calls for one key converge on a single hold.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

SCHEMA = """
create table if not exists holds (
  authorization_id text primary key,
  idempotency_key text not null unique,
  run_id text not null,
  step_id text not null,
  amount_cents integer,
  currency text not null,
  reference text,
  status text not null check (status in ('authorized', 'voided'))
)
"""


def default_path() -> Path:
    explicit = os.environ.get("A44_PAYMENTS_DB")
    if explicit:
        return Path(explicit)
    home = Path(os.environ.get("A44_HOME") or Path.home() / ".a44")
    return home / "payments.sqlite3"


class Ledger:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else default_path()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(SCHEMA)
        return conn

    def authorize(self, *, idempotency_key: str, run_id: str, step_id: str, amount_cents: int | None,
                  currency: str, reference: str | None) -> dict:
        conn = self._connect()
        try:
            conn.execute("begin immediate")
            conn.execute(
                "insert into holds values (?, ?, ?, ?, ?, ?, ?, 'authorized') "
                "on conflict (idempotency_key) do nothing",
                ("auth_" + uuid.uuid4().hex[:16], idempotency_key, run_id, step_id, amount_cents, currency,
                 reference))
            row = conn.execute("select * from holds where idempotency_key = ?", (idempotency_key,)).fetchone()
            conn.execute("commit")
        finally:
            conn.close()
        return {"authorizationId": row["authorization_id"], "status": row["status"],
                "amountCents": row["amount_cents"], "currency": row["currency"]}

    def void(self, *, run_id: str, authorization_id: str | None) -> list[str]:
        conn = self._connect()
        try:
            conn.execute("begin immediate")
            if authorization_id:
                rows = conn.execute("select authorization_id from holds where authorization_id = ?",
                                    (authorization_id,)).fetchall()
            else:
                rows = conn.execute("select authorization_id from holds where run_id = ? order by rowid",
                                    (run_id,)).fetchall()
            ids = [r["authorization_id"] for r in rows]
            conn.executemany("update holds set status = 'voided' where authorization_id = ?",
                             [(i,) for i in ids])
            conn.execute("commit")
        finally:
            conn.close()
        return ids

    def status(self, authorization_id: str) -> str | None:
        conn = self._connect()
        try:
            row = conn.execute("select status from holds where authorization_id = ?",
                               (authorization_id,)).fetchone()
        finally:
            conn.close()
        return row["status"] if row else None
