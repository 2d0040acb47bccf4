"""The daemon's own log, read from a real `a44 automation serve` subprocess's stderr: a default serve prints its
lifecycle at INFO (started, migrated, listening, stopped); `--log-format json` makes every line one JSON object
with ts, level, logger and message; stopping the PostgreSQL under the daemon and starting it again logs exactly
one line when the database is lost and one when it is back, and no traceback; the retention loop of `serve` does
not disturb any of it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from anthares44.automation.runtime.postgres.embedded import EmbeddedServer, free_port
from tests.runtime.daemon_support import A44


def wait_for(path: Path, predicate, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if predicate(lines):
            return lines
        time.sleep(0.1)
    raise AssertionError(f"timed out; stderr so far:\n{path.read_text(errors='replace')}")


@pytest.fixture
def own_pg():
    """A PostgreSQL of this test alone, so it can be stopped under the daemon and started again on its port (not
    under pytest's 0700 basetemp: the server may run as another user than root, as in tests/runtime/pg.py)."""
    root = Path(tempfile.mkdtemp(prefix="a44-test-own-pg-"))
    server = EmbeddedServer(root, durable=False)
    server.initdb()
    port = free_port()
    server.start(port, wait_s=30)
    yield server, port
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


def serve(tmp_path: Path, url: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "serve.stderr"
    env = {**os.environ, "A44_HOME": str(tmp_path / "home"), "A44_DATABASE_URL": url}
    env.pop("A44_APP_DATABASE_URL", None)       # no workflow SQL in these tests
    proc = subprocess.Popen([A44, "automation", "serve", "--http-port", "0", "--lease-timeout", "3s", *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    return proc, err


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(30)


def test_a_default_serve_prints_its_lifecycle_at_info(own_pg, tmp_path):
    _, port = own_pg
    proc, err = serve(tmp_path, f"postgresql://postgres@127.0.0.1:{port}/postgres")
    try:
        wait_for(err, lambda ls: any("http listening on" in x for x in ls))
    finally:
        assert stop(proc) == 0
    lines = err.read_text().splitlines()
    text = "\n".join(lines)
    for what in ("INFO a44.lifecycle migrated: applied 0001_init", "INFO a44.lifecycle serving worker=",
                 "INFO a44.lifecycle http listening on http://127.0.0.1:", "INFO a44.lifecycle stopped worker="):
        assert what in text, text
    assert "WARNING" not in text and "Traceback" not in text


def test_json_lines_and_one_line_per_database_state_change(own_pg, tmp_path):
    server, port = own_pg
    proc, err = serve(tmp_path, f"postgresql://postgres@127.0.0.1:{port}/postgres", "--log-format", "json")
    try:
        wait_for(err, lambda ls: any("http listening on" in x for x in ls))
        server.stop()
        wait_for(err, lambda ls: any("database unreachable" in x for x in ls))
        time.sleep(4)                     # several failed rounds of the claim loop, scheduler and flusher
        server.start(port, wait_s=30)
        wait_for(err, lambda ls: any("database reachable again" in x for x in ls), timeout=90)
        time.sleep(1.5)
    finally:
        code = stop(proc)
    lines = err.read_text().splitlines()
    docs = [json.loads(x) for x in lines]                                   # every line is one JSON object
    assert code == 0, lines
    assert all({"ts", "level", "logger", "message"} <= d.keys() for d in docs)
    assert all(d["ts"].endswith("Z") and "T" in d["ts"] for d in docs)
    messages = [d["message"] for d in docs]
    assert sum("database unreachable" in m for m in messages) == 1, messages
    assert sum("database reachable again" in m for m in messages) == 1, messages
    lost = next(d for d in docs if "database unreachable" in d["message"])
    assert lost["level"] == "WARNING" and lost["logger"] == "a44.lifecycle"
    assert not any("traceback" in d or "Traceback" in d["message"] for d in docs), docs
    assert [d["level"] for d in docs if d["message"].startswith(("serving", "stopped", "migrated"))] == ["INFO"] * 3


def test_json_lines_carry_the_correlation_fields_of_a_line_about_a_run():
    import io
    import logging

    from anthares44.automation.cli.daemon_log import configure
    from anthares44.automation.runtime.engine.worker import correlation

    out = io.StringIO()
    handler = configure("json", verbose=1, stream=out)
    try:
        log = logging.getLogger("a44.test_correlation")     # a logger no earlier test configured or disabled
        log.info("step.failed run=run_1", extra=correlation("run_1", "charge", 2))
        log.debug("not at -v")
        logging.getLogger("asyncpg.pool").warning("Failed to restore the pool connection floor; retrying",
                                                  exc_info=ConnectionRefusedError(111, "Connect call failed"))
    finally:
        logging.getLogger().removeHandler(handler)
    docs = [json.loads(x) for x in out.getvalue().splitlines()]
    assert docs == [{"ts": docs[0]["ts"], "level": "INFO", "logger": "a44.test_correlation",
                     "message": "step.failed run=run_1",
                     "run_id": "run_1", "step_id": "charge", "attempt": 2}]
