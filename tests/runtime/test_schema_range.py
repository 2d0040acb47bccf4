"""The schema range of a daemon (docs/store.md "Rolling upgrades", runtime/store/compat.py): each migration records
the lowest daemon schema that may still run once it is applied; a daemon runs against a newer schema whose
migrations still accept it, refuses a database that asks for a newer daemon with E_DB_SCHEMA_RANGE (naming both
schemas and what to do), and never applies a destructive migration of its own at start."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from anthares44.automation.errors import E_DB_SCHEMA, E_DB_SCHEMA_RANGE, A44Error
from anthares44.automation.runtime.store import migrate as migrations
from anthares44.automation.runtime.store.compat import daemon_schema
from anthares44.automation.runtime.store.vocabulary import Migration
from tests.runtime.daemon_support import A44, ServeProcess, wait_until
from tests.runtime.pg import query

D = daemon_schema()


def _future(url: str, min_daemon: int, destructive: str | None = None) -> None:
    """Make the database look migrated by a newer a44: one more migration, asking for daemons >= min_daemon."""
    query(url, "insert into automation.schema_migrations values ($1, $2, 'x', now())", D + 1, f"{D + 1:04d}_future")
    query(url, "insert into automation.schema_compat values ($1, $2, $3, $4)", D + 1, f"{D + 1:04d}_future",
          min_daemon, destructive)


def test_each_applied_migration_records_the_oldest_daemon_that_may_still_run(store, aio):
    rows = aio(store.fetch("schema_compat_need"))
    assert rows[0]["min_daemon_schema"] == 42          # the baseline (previous release), carried forward
    info = aio(store.schema_info())["schema"]
    assert info == {"db_schema": D, "daemon_schema": D, "min_daemon_schema": 42, "min_daemon_since": "baseline",
                    "destructive_pending": None, "compatible": True}


def test_a_newer_additive_schema_is_served(store, pg_url, aio):
    _future(pg_url, min_daemon=42)
    report = aio(store.migrate())
    assert report.newer == [D + 1] and not report.applied


def test_a_newer_schema_that_asks_for_a_newer_daemon_is_refused_with_both_schemas_and_the_remedy(store, pg_url, aio):
    _future(pg_url, min_daemon=D + 1, destructive="drops automation.lease_claim(text, timestamptz)")
    for destructive in (False, True):    # `db migrate` of this package too: it must not pretend all is well
        with pytest.raises(A44Error) as exc:
            aio(store.migrate(destructive=destructive))
        assert exc.value.code == E_DB_SCHEMA_RANGE
        assert f"schema {D + 1}" in exc.value.message and f">= {D + 1}" in exc.value.message
        assert f"runs against schema {D}" in exc.value.message and "drops automation.lease_claim" in exc.value.message
        assert "upgrade this daemon" in exc.value.hint
    assert aio(store.schema_info())["schema"]["compatible"] is False


def test_a_newer_a44_without_a_schema_range_is_still_refused(store, pg_url, aio):
    query(pg_url, "drop table automation.schema_compat")
    query(pg_url, "insert into automation.schema_migrations values ($1, 'x', 'x', now())", D + 1)
    with pytest.raises(A44Error) as exc:
        aio(store.migrate())
    assert exc.value.code == E_DB_SCHEMA


def test_a_daemon_holds_back_a_destructive_migration_and_db_migrate_applies_it(store, aio, monkeypatch):
    drop = Migration(D + 1, f"{D + 1:04d}_drop_old_claim",
                     f"-- {D + 1:04d}_drop_old_claim: the old claim goes\n"
                     f"-- destructive: drops automation.lease_claim_old(); needs daemons >= schema {D + 1}\n"
                     "create function automation.lease_claim_old() returns int language sql as 'select 1';\n")
    known = migrations.load_migrations()
    monkeypatch.setattr(migrations, "load_migrations", lambda: (*known, drop))
    with pytest.raises(A44Error) as exc:
        aio(store.migrate())
    assert exc.value.code == E_DB_SCHEMA_RANGE and drop.name in exc.value.message
    assert "a44 automation db migrate" in exc.value.hint and f">= {D + 1}" in exc.value.hint
    assert aio(store.fetchval("schema_compat_ready"))
    assert aio(store.migrate(destructive=True)).applied == [drop.name]
    need = aio(store.fetch("schema_compat_need"))[0]
    assert (need["number"], need["min_daemon_schema"]) == (D + 1, D + 1)
    assert need["destructive"] == "drops automation.lease_claim_old()"


def _serve(url: str, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "A44_DATABASE_URL": url, "A44_HOME": str(home)}
    return subprocess.run([A44, "automation", "serve", "--worker-id", "range"], env=env, capture_output=True,
                          text=True, timeout=60)


def test_serve_refuses_to_start_outside_its_range_and_db_status_says_why(pg_url, tmp_path):
    _future(pg_url, min_daemon=D + 1, destructive="renames automation.runs.state")
    done = _serve(pg_url, tmp_path)
    assert done.returncode == 1, done.stderr
    assert E_DB_SCHEMA_RANGE in done.stderr and "upgrade this daemon" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    env = {**os.environ, "A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path)}
    status = subprocess.run([A44, "automation", "db", "status"], env=env, capture_output=True, text=True, timeout=60)
    assert f"schema: database {D + 1}, accepts daemons of schema >= {D + 1}" in status.stdout, status.stdout
    assert "too old" in status.stdout
    doc = json.loads(subprocess.run([A44, "automation", "db", "status", "-f", "json"], env=env, capture_output=True,
                                    text=True, timeout=60).stdout)
    assert doc["schema"]["compatible"] is False and doc["schema"]["min_daemon_schema"] == D + 1


def test_a_daemon_under_a_newer_additive_schema_starts_and_says_so(pg_url, tmp_path):
    _future(pg_url, min_daemon=42)
    daemon = ServeProcess(pg_url, tmp_path, worker_id="older")
    try:
        wait_until(lambda: "serving worker=older" in daemon.output() or daemon.proc.poll() is not None, 60,
                   "the daemon to serve")
        assert f"the database is at schema {D + 1}, newer than this daemon's {D}" in daemon.output()
        assert f"schema range: this daemon runs against schema {D} and newer schemas" in daemon.output()
        assert daemon.term() == 0, daemon.output()
    finally:
        daemon.stop()
