"""Every CLI verb is accounted for: it runs against a remote daemon (its REST endpoint is then really called:
against a closed port it answers E_API_UNAVAILABLE, proof that no local database was used), or it has no
endpoint and says so with E_REMOTE_UNSUPPORTED when a remote is the target, or it works on this machine by
nature (compiling, the local database server, the secret file, the credentials file) and has no --remote."""

from __future__ import annotations

import argparse
import socket

import pytest

from anthares44.automation.cli.main import build_parser
from tests.cli_support import run_cli

# leaf verb -> its arguments (the target option is added where the verb's parser declares it)
REMOTE = {
    "automation publish": ["{wf}"], "automation run": ["wf_x", "-k", "k1"], "automation runs": [],
    "automation runs resolve": ["run_x", "--step", "s", "--outcome", "succeeded"],
    "automation runs skip": ["run_x", "--reason", "r"], "automation runs cancel": ["run_x", "--reason", "r"],
    "automation signal": ["run_x", "approved", "--data", "{}"],
    "automation approve": ["run_x", "--step", "s", "--decision", "approve"], "automation approvals": [],
    "automation runs show": ["run_x"], "automation runs tree": ["run_x"], "automation runs explain": ["run_x"], "automation runs wake": ["run_x", "--step", "s", "--reason", "r"],
    "automation runs export": ["--workflow", "wf_x"],
    "automation runs migrate": ["--workflow", "wf_x", "--to", "2"], "automation versions": ["wf_x"],
    "automation versions list": ["wf_x"], "automation versions retire": ["wf_x", "1"],
    "automation runs reschedule": ["run_x", "--step", "s", "--until", "2026-07-01T09:00:00Z"],
    "automation logs": ["run_x"],
    "automation partitions": ["run_x"], "automation replay": ["run_x", "--from-step", "s", "--dry-run"],
    "automation events publish": ["--type", "t", "--data", "{}", "--idempotency-key", "k"],
    "automation events list": [], "automation events show": ["evt_x"],
    "automation webhook secret": ["trg_x"], "automation webhook rotate": ["trg_x"],
    "automation connectors list": [], "automation queues stats": [], "automation dlq list": [],
    "automation dlq stats": ["q_x"], "automation dlq show": ["dlq_x"], "automation dlq redrive": ["q_x"],
    "automation metrics": [], "automation flow list": [], "automation flow buffers": ["--workflow", "doc-sync"],
    "automation flow pause": ["http:pj:h", "--until", "2030-01-01T00:00:00Z"], "automation flow resume": ["http:pj:h"],
    "auth token create": ["--name", "n", "--scope", "automation:read"], "auth token list": [],
    "auth token revoke": ["tok_x"],
    "monitor channel create": ["--name", "n", "--type", "slack", "--url", "http://127.0.0.1:9/x"],
    "monitor channel list": [], "monitor channel show": ["n"], "monitor channel rm": ["n"],
    "monitor channel test": ["n"], "monitor notifications": [], "monitor notifications show": ["1"],
    "monitor notifications retry": ["1"],
    "monitor alert create": ["--name", "n", "--metric", "automation.dlq_depth", "--condition", "> 1"],
    "monitor alert builtin": [], "monitor alert list": [], "monitor alert show": ["n"], "monitor alert rm": ["n"],
    "monitor alert test": ["n"], "monitor alerts": [],
}
NO_ENDPOINT = {
    "automation webhook sign": ["--trigger", "t", "--file", "{body}"],
    "automation webhook send": ["--trigger", "t", "--file", "{body}"],
    "automation webhook list": [], "automation schedule occurrences": [],
}
LOCAL_BY_NATURE = {  # why each works on this machine only
    "automation lint": "compiles files", "automation compile": "compiles files",
    "automation verify": "imports the new code and replays histories here (--since reads the database it names)", "automation schema": "writes files",
    "automation expr": "evaluates an expression", "automation schedule preview": "compiles files, no database",
    "automation db start": "the local PostgreSQL", "automation db stop": "the local PostgreSQL",
    "automation db status": "the local PostgreSQL", "automation db url": "the local PostgreSQL",
    "automation db migrate": "the database's schema", "automation serve": "is the daemon",
    "automation ingest": "is the ingestion server", "automation secrets set": "the local secret file",
    "automation secrets list": "the local secret file", "automation secrets rm": "the local secret file",
    "automation secrets rotate-key": "the local secret file", "auth login": "the credentials file",
    "auth logout": "the credentials file", "auth status": "the credentials file", "completion": "shell scripts",
    "automation console": "opens a browser on this machine at a daemon's URL",
    "automation test": "runs the test kit on databases of its own",
}


def _leaves(parser, path=(), inherited=frozenset()):
    """(verb path, options it accepts, the path prefix whose parser declares --api-url)."""
    own = {o for a in parser._actions for o in a.option_strings}
    where = path if "--api-url" in own else None
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), inherited | own, where
        return
    for sa in subs:
        seen = set()
        for name, sub in sa.choices.items():
            if id(sub) not in seen:
                seen.add(id(sub))
                for leaf, opts, w in _leaves(sub, path + (name,), inherited | own):
                    yield leaf, opts, w or where
        if not sa.required:
            yield " ".join(path), inherited | own, where


LEAVES = {leaf: (opts, where) for leaf, opts, where in _leaves(build_parser())}


def test_every_verb_is_remote_capable_refuses_remotely_or_is_local_by_nature():
    declared = set(REMOTE) | set(NO_ENDPOINT) | set(LOCAL_BY_NATURE)
    assert set(LEAVES) == declared, f"classify: {sorted(set(LEAVES) ^ declared)}"
    for leaf in (*REMOTE, *NO_ENDPOINT):
        assert {"--remote", "--api-url", "--local"} <= LEAVES[leaf][0], leaf
    for leaf in LOCAL_BY_NATURE:
        assert "--remote" not in LEAVES[leaf][0], leaf


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No database at all, a token, and the URL of a port nobody listens on."""
    for name in ("A44_DATABASE_URL", "A44_API_URL", "A44_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("A44_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("A44_API_TOKEN", "a44_pat_" + "x" * 43)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    wf = tmp_path / "wf.yaml"
    wf.write_text("name: w\nversion: 1\nsteps:\n  - id: only\n    uses: pass\n    timeout: 1s\n")
    (tmp_path / "body.json").write_text("{}")
    return f"http://127.0.0.1:{port}", {"{wf}": str(wf), "{body}": str(tmp_path / "body.json")}


def _argv(leaf: str, args: list[str], url: str, files: dict) -> list[str]:
    path = leaf.split()
    where = len(LEAVES[leaf][1])
    args = [files.get(a, a) for a in args]
    return [*path[:where], "--api-url", url, *path[where:], *args]


@pytest.mark.parametrize("leaf", sorted(REMOTE))
def test_a_remote_verb_calls_the_api_and_never_the_local_database(offline, capsys, leaf):
    url, files = offline
    code, out, err = run_cli(capsys, *_argv(leaf, REMOTE[leaf], url, files))
    assert code == 1 and err.startswith("E_API_UNAVAILABLE cannot reach the a44 API at " + url), (leaf, out, err)


@pytest.mark.parametrize("leaf", sorted(NO_ENDPOINT))
def test_a_verb_without_endpoint_refuses_a_remote_target(offline, capsys, leaf):
    url, files = offline
    code, out, err = run_cli(capsys, *_argv(leaf, NO_ENDPOINT[leaf], url, files))
    assert code == 1 and err.startswith("E_REMOTE_UNSUPPORTED"), (leaf, out, err)
    assert "--local" in err
