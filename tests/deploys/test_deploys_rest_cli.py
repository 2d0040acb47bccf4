"""Deploys over REST and the CLI (§23, docs/deploys.md) on a live daemon: `publish --plan` (POST /publish/plan)
stores nothing and exits 3 while a run is blocked (text, json, github), 0 with a `migrate:` block; `versions`
lists the open runs; `versions retire` is refused (409 E_VERSION_HAS_OPEN_RUNS) while runs are open; `runs
migrate` (POST /workflows/{wf}/migrate) moves them audited with who and why, the dry run moves nothing; bad
input is a stable code, never a 5xx; the moved runs finish on the new version with the new step skipped."""

from __future__ import annotations

import json

from anthares44.automation.app.automation import Automation
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.cli_support import run_cli
from tests.ingestion.support import P
from tests.partitions.support import compile_yaml
from tests.rest.support import api, target  # noqa: F401 - the fixtures

STEPS = """\
  - id: a
    uses: pass
    timeout: 5s
{extra}  - id: w
    wait: {{signal: go, timeout: 1d, onTimeout: fail}}
  - id: z
    uses: pass
    timeout: 5s
"""
NEW = "  - id: n\n    uses: pass\n    timeout: 5s\n"
V1 = "name: deploy-demo\nversion: 1\nsteps:\n" + STEPS.format(extra="")
V2_BARE = "name: deploy-demo\nversion: 2\nsteps:\n" + STEPS.format(extra=NEW)
V2 = "name: deploy-demo\nversion: 2\nmigrate: {from: [1], addedBeforeFrontier: skip}\nsteps:\n" + \
    STEPS.format(extra=NEW)
WF = "wf_deploy_demo"


async def _parked(store, ir, n: int) -> list[str]:
    await store.publish_version(P, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    runs = [(await store.create_run(P, ir.workflow_id, {}, f"k{i}")).run_id for i in range(n)]
    await Engine(store, ConnectorRegistry(), worker_id="w1").drive()
    return runs


async def _moves(store, runs: list[str]) -> list[dict]:
    return [e for r in runs for e in await store.list_run_events(r) if e["kind"] == "run_version_changed"]


async def _finish(store, runs: list[str]) -> list[tuple[str, int, list[str]]]:
    auto = Automation(store, P)
    for r in runs:
        await auto.signal(r, "go")
    await Engine(store, ConnectorRegistry(), worker_id="w1").drive()
    out = []
    for r in runs:
        row = await store.get_run(r)
        n = [a["status"] for a in await store.list_attempts(r) if a["step_id"] == "n"]
        out.append((row["state"], row["version"], n))
    return out


def test_plan_versions_retire_and_migrate_over_rest_and_the_cli(api, target, capsys, tmp_path):
    runs = api.live.call(_parked, compile_yaml(tmp_path, V1), 3)
    s, doc = api("POST", "/publish/plan", {"files": {"v2.yaml": V2_BARE}}, as_="write")
    assert s == 200 and doc["counts"] == {"compatible": 0, "mappable": 0, "blocked": 3} and not doc["ok"]
    assert {r["first_difference"] for r in doc["workflows"][0]["runs"]} == {"n"}
    assert doc["workflows"][0]["versions"][0]["added"] == ["n"]
    (tmp_path / "v2_bare.yaml").write_text(V2_BARE)
    (tmp_path / "v2.yaml").write_text(V2)
    for where in ("local", "remote"):
        code, out, err = run_cli(capsys, "automation", "publish", str(tmp_path / "v2_bare.yaml"), "--plan",
                                 *target(where), "--format", "github")
        assert code == 3, (where, out, err)
        assert out.count("::error title=wf_deploy_demo v2 deploy plan::") == 3 and "3 blocked" in out
        code, out, err = run_cli(capsys, "automation", "publish", str(tmp_path / "v2.yaml"), "--plan",
                                 *target(where))
        assert code == 0 and "0 compatible, 3 mappable, 0 blocked" in out, (where, out, err)
    s, versions = api("GET", f"/workflows/{WF}/versions")
    assert s == 200 and [(v["version"], v["open_runs"]) for v in versions["versions"]] == [(1, 3)]

    s, doc = api("POST", "/publish", {"files": {"v2.yaml": V2}}, as_="write")
    assert s == 200 and doc["workflows"][0]["outcome"] == "created"
    s, err = api("POST", f"/workflows/{WF}/versions/1/retire", {}, as_="write")
    assert s == 409 and err["error"]["code"] == "E_VERSION_HAS_OPEN_RUNS"
    code, out, _ = run_cli(capsys, "automation", "versions", "retire", WF, "1", *target("local"))
    assert code == 1

    s, dry = api("POST", f"/workflows/{WF}/migrate", {"to": 2, "dry_run": True}, as_="write")
    assert s == 200 and dry["counts"] == {"would_move": 3}
    s, versions = api("GET", f"/workflows/{WF}/versions")
    assert [(v["version"], v["open_runs"]) for v in versions["versions"]] == [(1, 3), (2, 0)]

    code, out, err = run_cli(capsys, "automation", "runs", "migrate", "--workflow", "deploy-demo", "--to", "2",
                             "--filter", f'run.run_id == "{runs[0]}"', "--reason", "first", *target("remote"),
                             "--format", "json")
    assert code == 0, err
    assert json.loads(out)["counts"] == {"moved": 1}
    s, doc = api("POST", f"/workflows/{WF}/migrate", {"to": 2, "reason": "deploy 2"}, as_="write")
    assert s == 200 and doc["counts"] == {"moved": 2}
    assert all(r["move"]["skip_added"] == ["n"] for r in doc["runs"])
    moved = api.live.call(_moves, runs)
    assert sorted((e["data"]["by"], e["data"]["reason"]) for e in moved) == [
        ("token:t-admin", "first"), ("token:t-write", "deploy 2"), ("token:t-write", "deploy 2")]
    code, out, _ = run_cli(capsys, "automation", "versions", WF, *target("local"))
    assert code == 0 and out.splitlines()[1].split()[:3] == ["v1", "pin", "0"]
    s, doc = api("POST", f"/workflows/{WF}/versions/1/retire", {}, as_="write")
    assert s == 200 and doc["outcome"] == "deleted"
    assert api.live.call(_finish, runs) == [("succeeded", 2, ["skipped"])] * 3


def test_bad_migrate_and_retire_requests_get_stable_codes(api):
    s, _ = api("POST", "/publish", {"files": {"v1.yaml": V1}}, as_="write")
    assert s == 200
    cases = [
        ({"to": "two"}, 400, "E_INVALID_ARGUMENT"),
        ({"to": 9}, 404, "E_WORKFLOW_NOT_FOUND"),
        ({"to": 1, "rate": "fast"}, 400, "E_INVALID_ARGUMENT"),
        ({"to": 1, "from_versions": [3]}, 409, "E_VERSION_NOT_NEWER"),
        ({"to": 1, "filter": "input.("}, 400, "E_INVALID_ARGUMENT"),
        ({"to": 1, "surprise": True}, 400, "E_INVALID_ARGUMENT"),
    ]
    for body, status, code in cases:
        s, doc = api("POST", f"/workflows/{WF}/migrate", body, as_="write")
        assert (s, doc["error"]["code"]) == (status, code), body
    s, doc = api("GET", "/workflows/wf_nothing_here/versions")
    assert (s, doc["error"]["code"]) == (404, "E_WORKFLOW_NOT_FOUND")
    s, doc = api("POST", f"/workflows/{WF}/versions/abc/retire", {}, as_="write")
    assert s == 400
    s, doc = api("POST", "/publish/plan", {"files": {"bad.yaml": "name: x\nversion: 1\nsteps: []\n"}}, as_="write")
    assert s == 422 and doc["diagnostics"] and doc["stored"] is False
    s, doc = api("POST", f"/workflows/{WF}/migrate", {"to": 1}, as_="read")
    assert s == 403
