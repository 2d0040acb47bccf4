"""The schema range of a daemon during a rolling upgrade (docs/store.md "Rolling upgrades"): which database schemas
this package's daemon may run against, read from the migrations' destructive marks and the database's
`automation.schema_compat` record, and the clear refusal when it may not.

A daemon's schema is the number of the newest migration it ships. It runs against its own schema and any newer one
whose migrations are all additive for it: each applied migration records the lowest daemon schema that may still run
(an additive one carries the previous value forward, a destructive one raises it to its mark). So the range is
"schema D, and newer schemas until a migration asks for daemons > D"; below D the daemon applies its own additive
migrations at start, but never a destructive one on a database in use (that is `a44 automation db migrate`, once
older daemons are gone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...errors import E_DB_SCHEMA_RANGE, A44Error
from .vocabulary import Migration, load_migrations

# the header line of a destructive migration: `-- destructive: WHAT; needs daemons >= schema N`
DESTRUCTIVE_MARK = re.compile(r"^--\s*destructive:\s*(?P<what>.+?);\s*needs (?:all )?daemons >= schema (?P<n>\d+)\s*$",
                              re.I)
UPGRADE_HINT = "pip install -U anthares44-automation"


@dataclass(frozen=True)
class Destructive:
    what: str           # what the migration removes or changes in place
    min_daemon: int     # daemons of an older schema may not run once it is applied


def destructive_mark(migration: Migration) -> Destructive | None:
    """The mark in the migration's header (its leading comment lines), or None for an additive migration."""
    for line in migration.sql.splitlines():
        if not line.startswith("--"):
            break
        m = DESTRUCTIVE_MARK.match(line.strip())
        if m:
            return Destructive(m.group("what").strip(), int(m.group("n")))
    return None


def daemon_schema() -> int:
    """This package's daemon schema: the number of its newest migration."""
    return load_migrations()[-1].number


def describe_range(daemon: int) -> str:
    return (f"this daemon runs against schema {daemon} and newer schemas whose migrations still accept daemons of "
            f"schema {daemon}")


def too_new(db_schema: int, need: dict[str, Any], daemon: int) -> A44Error:
    """The database asks for a newer daemon than this one (a destructive migration it does not know)."""
    why = f" ({need['destructive']})" if need.get("destructive") else ""
    return A44Error(E_DB_SCHEMA_RANGE,
                    f"the database is at schema {db_schema} and needs daemons of schema >= {need['min_daemon_schema']} "
                    f"since migration {need['name']}{why}; {describe_range(daemon)}",
                    hint=f"upgrade this daemon to schema >= {need['min_daemon_schema']} ({UPGRADE_HINT}), or point "
                         f"A44_DATABASE_URL at another database")


def held_back(db_schema: int, held: Migration, mark: Destructive, daemon: int) -> A44Error:
    """A destructive migration of this package is pending: only `db migrate` applies it (older daemons may run)."""
    return A44Error(E_DB_SCHEMA_RANGE,
                    f"the database is at schema {db_schema} and this daemon needs schema {daemon}: migration "
                    f"{held.name} is destructive ({mark.what}) and only `a44 automation db migrate` applies it; "
                    f"{describe_range(daemon)}",
                    hint=f"once every daemon is at schema >= {mark.min_daemon}, run `a44 automation db migrate`, "
                         f"then start this daemon")


def range_info(applied: list[int], need: dict[str, Any] | None, daemon: int) -> dict[str, Any]:
    """What `db status` shows of the range: the database's schema, the oldest daemon schema it accepts, this
    package's, and whether this package's daemon may run against it."""
    db_schema = max(applied, default=0)
    min_daemon = need["min_daemon_schema"] if need else 0
    pending = [m for m in load_migrations() if m.number not in set(applied)]
    held = next(((m, k) for m in pending if (k := destructive_mark(m)) is not None), None)
    return {"db_schema": db_schema, "daemon_schema": daemon, "min_daemon_schema": min_daemon,
            "min_daemon_since": need["name"] if need and min_daemon else None,
            "destructive_pending": held[0].name if held else None,
            "compatible": min_daemon <= daemon and held is None}
