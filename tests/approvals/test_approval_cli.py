"""`a44 automation approve` and `a44 automation approvals` as a user types them (in-process `cli.main` on the test
database, and --api-url against a real server): a local call is `local:<os user>` (the initiator of the runs it
starts, so it cannot approve those), a remote one the token's name; `runs` and `runs RUN` say a run waits on an
approval and who may decide it; `approvals --mine` lists what waits for you."""

from __future__ import annotations

import getpass
import json
from datetime import timedelta

import pytest

from anthares44.automation.runtime.engine import Engine
from anthares44.automation.runtime.ingestion.tokens import create_token
from anthares44.automation.runtime.store.core import Store
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.cli_support import run_cli
from tests.ingestion.support import LiveServer

ME = f"local:{getpass.getuser()}"
FILES = {
    "approvers.yaml": f"- kind: approvers\n  name: finance-leads\n  members: [{json.dumps(ME)}, bob]\n",
    "refund.yaml": """\
name: refund
version: 1
steps:
  - id: sign-off
    approval: {approvers: {groups: [finance-leads]}, timeout: 72h}
  - id: pay
    uses: pass
    timeout: 5s
""",
}


def cli(capsys, *argv):
    return run_cli(capsys, "automation", *argv)


@pytest.fixture
def db(pg_url, monkeypatch, tmp_path):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.setenv("A44_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("A44_PROJECT", raising=False)
    monkeypatch.delenv("A44_API_URL", raising=False)
    return pg_url


def _drive(aio, url, tmp_path):
    async def go():
        store = await Store.connect(url, results_dir=tmp_path / "results")
        try:
            return await Engine(store, ConnectorRegistry(), worker_id="w1").drive()
        finally:
            await store.close()
    return aio(go())


def _create(aio, url, tmp_path, initiator: str) -> str:
    async def go():
        store = await Store.connect(url, results_dir=tmp_path / "results")
        try:
            return (await store.create_run("pj_default", "wf_refund", {}, f"k-{initiator}",
                                           initiator=initiator)).run_id
        finally:
            await store.close()
    return aio(go())


def test_approve_and_approvals_locally_and_remotely(db, capsys, tmp_path, aio, monkeypatch):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    code, out, err = cli(capsys, "publish", str(tmp_path / "approvers.yaml"), str(tmp_path / "refund.yaml"))
    assert code == 0, err
    code, out, err = cli(capsys, "run", "refund", "-k", "mine", "--format", "json")
    assert code == 0, err
    mine = json.loads(out)["run_id"]                 # started by me: I may not approve it
    theirs = _create(aio, db, tmp_path, "alice")
    _drive(aio, db, tmp_path)

    code, out, err = cli(capsys, "runs")
    assert code == 0 and "approval of sign-off 0/1 by " + ", ".join(sorted([ME, "bob"])) in out
    code, out, err = cli(capsys, "runs", theirs)
    assert code == 0 and "waiting on approval of sign-off 0/1 by " + ", ".join(sorted([ME, "bob"])) in out
    code, out, err = cli(capsys, "approvals", "--mine", "--format", "json")
    assert code == 0 and {a["run_id"] for a in json.loads(out)["approvals"]} == {mine, theirs}

    code, out, err = cli(capsys, "approve", mine, "--step", "sign-off", "--decision", "approve")
    assert code != 0 and "E_SELF_APPROVAL" in err
    code, out, err = cli(capsys, "approve", theirs, "--step", "sign-off", "--decision", "approve",
                         "--comment", "fine")
    assert code == 0 and "approved" in out and ME in out
    code, out, err = cli(capsys, "approve", theirs, "--step", "sign-off", "--decision", "reject")
    assert code == 0 and "you decided before (approve)" in out
    code, out, err = cli(capsys, "runs", theirs, "--format", "json")
    [req] = json.loads(out)["approvals"]
    assert [(d["person"], d["decision"], d["via"], d["comment"]) for d in req["decisions"]] == [
        (ME, "approve", "cli", "fine")]

    live = LiveServer(db, results_dir=tmp_path / "results-live")
    try:
        token = live.call(create_token, "pj_default", "bob", ["automation:approve"], timedelta(days=1)).token
        monkeypatch.setenv("A44_API_TOKEN", token)
        code, out, err = cli(capsys, "approvals", "--mine", "--api-url", live.url, "--format", "json")
        assert code == 0, err
        assert [a["run_id"] for a in json.loads(out)["approvals"]] == [mine]
        code, out, err = cli(capsys, "approve", mine, "--step", "sign-off", "--decision", "reject",
                             "--api-url", live.url, "--format", "json")
        assert code == 0, err
        assert (json.loads(out)["person"], json.loads(out)["outcome"]) == ("bob", "rejected")
        assert "Traceback" not in live.log_text()
    finally:
        live.close()
