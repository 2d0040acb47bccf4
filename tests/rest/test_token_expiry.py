"""`auth token create --expires X` follows one rule (app.admin.token_ttl) on the database and through the REST API:
the same refusals with the same line and exit code (`0` and `0s` are refused, not read as never), and the same
expiry for what is accepted. A real daemon on 127.0.0.1 over the test database; the real `a44` in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from anthares44.automation.app.admin import Admin
from tests.ingestion.support import LiveServer, P

A44 = str(Path(sys.executable).parent / "a44")
_CLEAR = ("A44_DATABASE_URL", "A44_API_URL", "A44_API_TOKEN", "A44_PROJECT")


@pytest.fixture
def live(pg_url, tmp_path):
    server = LiveServer(pg_url, results_dir=tmp_path / "results")
    yield server
    server.close()


def _create(env, expires: str) -> subprocess.CompletedProcess:
    return subprocess.run([A44, "auth", "token", "create", "--name", "t", "--scope", "automation:read",
                           "--expires", expires, "--format", "json"], env=env, capture_output=True, text=True,
                          timeout=60)


def test_local_and_rest_agree_on_token_expiry(live, pg_url, tmp_path):
    async def admin_token(store):
        return (await Admin(store, P).create_token("admin", ["automation:admin"], "1d", [])).token

    base = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    local = {**base, "A44_HOME": str(tmp_path / "local"), "A44_DATABASE_URL": pg_url, "A44_PROJECT": P}
    remote = {**base, "A44_HOME": str(tmp_path / "remote"), "A44_API_URL": live.url,
              "A44_API_TOKEN": live.call(admin_token), "A44_PROJECT": P}
    for refused in ("0", "0s", " 0", "soon"):
        here, there = _create(local, refused), _create(remote, refused)
        assert here.returncode == there.returncode == 2, (refused, here.stderr, there.stderr)
        assert here.stderr == there.stderr and here.stderr.startswith("E_INVALID_ARGUMENT expires: "), refused
        assert "hint: give an age (30d, 12h), or `never`" in here.stderr
        assert here.stdout == there.stdout == ""
    for accepted, lives in (("never", None), ("none", None), ("12h", timedelta(hours=12))):
        docs = []
        for env in (local, remote):
            p = _create(env, accepted)
            assert p.returncode == 0, (accepted, p.stderr)
            docs.append(json.loads(p.stdout))
        if lives is None:
            assert [d["expires_at"] for d in docs] == [None, None], accepted
        else:
            here, there = (datetime.fromisoformat(d["expires_at"].replace("Z", "+00:00")) for d in docs)
            assert abs(there - here) < timedelta(minutes=1), accepted     # made moments apart, the same age
            assert abs(here - datetime.now(UTC) - lives) < timedelta(minutes=1), accepted
        assert {d["project_id"] for d in docs} == {P}
