"""The replay gate (SPEC §23, docs/verify.md) on the real store and engine, time on a ManualClock: 200 runs of a
code workflow really run and exported; `verify` of a version that swaps two steps finds all 200 at the step, with
no connector call; with `step.patched` guarding the change it passes; a live run that meets the divergence stops in
`blocked_version` at its first visit (within one lease period), is never retried, raises the built-in alert and
is settled by `runs cancel`."""

from __future__ import annotations

import json
from datetime import timedelta

from anthares44.automation.app.verify import histories_from_store, verify, yaml_divergence
from anthares44.automation.cli.main import main
from anthares44.automation.runtime.alerts.evaluator import Evaluator
from anthares44.automation.sdk.loader import import_path
from tests.code.support import published_code
from tests.runtime.engine_support import PROJECT, engine
from tests.runtime.pg import query

HEAD = '''from anthares44.automation import workflow, step

SWAPPED = {"on": False}
CALLS = []


def call(name, n):
    CALLS.append(name)
    return {"step": name, "n": n}

'''
V1 = HEAD + '''
@workflow("swapflow", version=1)
async def swapflow(ctx, input):
    await step.run("a", fn=lambda: call("a", input["n"]))
    first, second = ("c", "b") if SWAPPED["on"] and not PATCH else ("b", "c")
    if SWAPPED["on"] and PATCH and step.patched("swap-b-c"):
        first, second = "c", "b"
    await step.run(first, fn=lambda: call(first, input["n"]))
    await step.sleep("nap", "10s")
    await step.run(second, fn=lambda: call(second, input["n"]))
    return {"n": input["n"]}
'''
V2 = HEAD + '''
@workflow("swapflow", version=2)
async def swapflow(ctx, input):
    await step.run("a", fn=lambda: call("a", input["n"]))
    await step.run("c", fn=lambda: call("c", input["n"]))
    await step.sleep("nap", "10s")
    await step.run("b", fn=lambda: call("b", input["n"]))
    return {"n": input["n"]}
'''
V2_PATCHED = HEAD + '''
@workflow("swapflow", version=2)
async def swapflow(ctx, input):
    await step.run("a", fn=lambda: call("a", input["n"]))
    first, second = ("c", "b") if step.patched("swap-b-c") else ("b", "c")
    await step.run(first, fn=lambda: call(first, input["n"]))
    await step.sleep("nap", "10s")
    await step.run(second, fn=lambda: call(second, input["n"]))
    return {"n": input["n"]}
'''


def test_200_histories_swap_found_at_the_step_patched_passes(store, clock, aio, tmp_path, pg_url, capsys,
                                                             monkeypatch):
    auto = aio(published_code(store, tmp_path, "swap_v1.py", V1.replace("PATCH", "False")))
    for i in range(200):
        aio(auto.run("swapflow", {"n": i}, f"k{i}"))
    eng = engine(store, clock=clock)
    aio(eng.drive())
    clock.advance(timedelta(seconds=11))
    aio(eng.drive())
    assert query(pg_url, "select state, count(*) from automation.runs group by state") == [("succeeded", 200)]
    histories = aio(auto.export("swapflow", since=timedelta(days=14), sample=500))
    assert len(histories) == 200
    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps(h) + "\n" for h in histories))
    for name, source in (("swap_v2.py", V2), ("swap_v2p.py", V2_PATCHED)):
        (tmp_path / name).write_text(source)

    capsys.readouterr()
    assert main(["automation", "verify", str(tmp_path / "swap_v2.py"), "--histories", str(export),
                 "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["checked"], out["divergent"], out["byStep"]) == (200, 200, {"c": 200})
    assert {(f["position"], f["history_has"], f["code_asked"]) for f in out["findings"]} == {(2, "b", "c")}
    assert sorted(f["run_id"] for f in out["findings"]) == sorted(h["run"]["run_id"] for h in histories)
    assert import_path(tmp_path / "swap_v2.py").CALLS == []          # zero connector calls

    assert main(["automation", "verify", str(tmp_path / "swap_v2p.py"), "--histories", str(export)]) == 0
    assert "0 of 200 histories diverge" in capsys.readouterr().err
    assert import_path(tmp_path / "swap_v2p.py").CALLS == []

    assert main(["automation", "verify", str(tmp_path / "swap_v2.py"), "--histories", str(export),
                 "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len([x for x in lines if x.startswith("::error ")]) == 200 and "title=replay divergence at c" in lines[0]

    # the same gate reading the store (`--since 14d --sample 500`), open runs included
    got = aio(verify(str(tmp_path / "swap_v2.py"), aio(histories_from_store(
        store, PROJECT, ["wf_swapflow"], since=timedelta(days=14), sample=50))))
    assert (got.checked, got.divergent) == (50, 50)
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.delenv("A44_PROJECT", raising=False)
    assert main(["automation", "verify", str(tmp_path / "swap_v2.py"), "--since", "3650d", "--sample", "20"]) == 1
    assert "20 of 20 histories diverge from" in capsys.readouterr().err
    assert main(["automation", "verify", str(tmp_path / "swap_v2p.py"), "--since", "3650d", "--sample", "0"]) == 2


def test_bad_input_exits_2_with_a_stable_code(tmp_path, capsys):
    (tmp_path / "wf.py").write_text(V2)
    missing = main(["automation", "verify", str(tmp_path / "wf.py"), "--histories", str(tmp_path / "none.jsonl")])
    err = capsys.readouterr().err
    assert missing == 2 and err.startswith("E_BAD_INPUT cannot read") and "Traceback" not in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run": {"run_id": "r1"}, "attempts": []}\n{not json\n')
    assert main(["automation", "verify", str(tmp_path / "wf.py"), "--histories", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"E_BAD_INPUT {bad}:2: not a JSON line")
    bad.write_text('[1, 2]\n')
    assert main(["automation", "verify", str(tmp_path / "wf.py"), "--histories", str(bad)]) == 2
    assert f"{bad}:1: not a history" in capsys.readouterr().err
    bad.write_text('{"run": {"run_id": "r1"}, "attempts": [{"step_id": "a", "status": "succeeded", '
                   '"started_at": "yesterday"}]}\n')
    assert main(["automation", "verify", str(tmp_path / "wf.py"), "--histories", str(bad)]) == 2
    assert f"{bad}:1: not a history: an attempt is malformed" in capsys.readouterr().err
    bad.write_text(json.dumps({"histories": [{"run": {"run_id": "r1", "workflow_id": "wf_swapflow",
                                                      "state": "succeeded"}, "attempts": []}]}))
    assert main(["automation", "verify", str(tmp_path / "wf.py"), "--histories", str(bad)]) == 1
    assert "1 of 1 histories diverge" in capsys.readouterr().err    # the code asks for 'a': not in the history
    (tmp_path / "broken.py").write_text("import no_such_module\n")
    assert main(["automation", "verify", str(tmp_path / "broken.py"), "--histories", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("E_BAD_INPUT importing")


def test_a_live_divergence_is_blocked_version_alerted_and_cancel_settles_it(store, clock, aio, tmp_path, pg_url,
                                                                           capsys, monkeypatch):
    auto = aio(published_code(store, tmp_path, "swap_live.py", V1.replace("PATCH", "False")))
    run_id = aio(auto.run("swapflow", {"n": 1}, "live")).run_id
    eng = engine(store, clock=clock, lease_s=30)
    aio(eng.drive())
    assert aio(store.get_run(run_id))["state"] == "sleeping"
    import_path(tmp_path / "swap_live.py").SWAPPED["on"] = True     # the deployed code now swaps b and c
    clock.advance(timedelta(seconds=11))
    picked_up = clock.now()
    aio(eng.drive())
    run = aio(store.get_run(run_id))
    assert (run["state"], run["failed_step"], run["error_code"]) == ("blocked_version", "c",
                                                                     "E_NONDETERMINISTIC_REPLAY")
    assert run["lease_owner"] is None and run["next_wake_at"] is None
    at = query(pg_url, "select at from automation.run_events where run_id = $1 and kind = 'run.state' "
                       "and state = 'blocked_version'", run_id)
    assert len(at) == 1 and at[0][0] - picked_up <= timedelta(seconds=30)     # within one lease period
    before = query(pg_url, "select count(*) from automation.step_attempts where run_id = $1", run_id)
    clock.advance(timedelta(minutes=5))
    aio(eng.drive())                                        # never retried: not due, nothing new written
    assert aio(store.get_run(run_id))["state"] == "blocked_version"
    assert query(pg_url, "select count(*) from automation.step_attempts where run_id = $1", run_id) == before
    assert import_path(tmp_path / "swap_live.py").CALLS == ["a", "b"]     # c never ran

    ev = Evaluator(store, holder="d1", interval_s=15)
    aio(ev.step())
    alerts = query(pg_url, "select rule, state, context from automation.alerts")
    assert [(r, s) for r, s, _ in alerts] == [("builtin:blocked_version", "firing")]
    ctx = alerts[0][2] if isinstance(alerts[0][2], dict) else json.loads(alerts[0][2])
    assert (ctx["workflow"], ctx["version"], ctx["failed_step"], ctx["run_id"]) == ("wf_swapflow", 1, "c", run_id)
    assert "runs migrate --workflow wf_swapflow" in ctx["next_action"] and f"runs cancel {run_id}" in \
        ctx["next_action"]

    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.delenv("A44_PROJECT", raising=False)
    capsys.readouterr()
    assert main(["automation", "runs", "show", run_id]) == 0
    shown = capsys.readouterr().out
    assert "blocked_version" in shown and "step: c  error: E_NONDETERMINISTIC_REPLAY" in shown
    assert "the log recorded step 'b' but the code asked for step 'c'" in shown and "runs cancel" in shown
    assert main(["automation", "runs", "--state", "blocked_version", "--format", "json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)["runs"]] == [run_id]

    from anthares44.automation.errors import A44Error

    try:
        aio(auto.cancel(run_id, by="ops@example", compensate=True))
        raise AssertionError("a blocked run cannot be compensated")
    except A44Error as err:
        assert err.code == "E_CANCEL_NOT_ALLOWED"
    got = aio(auto.cancel(run_id, by="ops@example", reason="code diverged"))
    assert (got["outcome"], got["previous_state"]) == ("cancelled", "blocked_version")
    assert aio(store.get_run(run_id))["state"] == "cancelled"
    clock.advance(timedelta(seconds=15))
    aio(ev.step())
    assert query(pg_url, "select rule, state from automation.alerts") == [("builtin:blocked_version", "resolved")]


def test_patched_keeps_an_old_run_on_the_old_path_and_new_runs_on_the_new(store, clock, aio, tmp_path, pg_url):
    auto = aio(published_code(store, tmp_path, "swap_patch.py", V1.replace("PATCH", "True")))
    old = aio(auto.run("swapflow", {"n": 1}, "old")).run_id
    eng = engine(store, clock=clock)
    aio(eng.drive())
    mod = import_path(tmp_path / "swap_patch.py")
    mod.SWAPPED["on"] = True            # deployed: `if step.patched("swap-b-c"): c, b`
    new = aio(auto.run("swapflow", {"n": 2}, "new")).run_id
    aio(eng.drive())
    clock.advance(timedelta(seconds=11))
    aio(eng.drive())
    assert aio(store.get_run(old))["state"] == "succeeded" and aio(store.get_run(new))["state"] == "succeeded"

    def order(run_id):
        return [s for (s,) in query(pg_url, "select step_id from automation.step_attempts where run_id = $1 "
                                            "and kind = 'action' order by started_at, step_id", run_id)]
    assert [s for s in order(old) if not s.startswith("ctx.")] == ["a", "b", "nap", "c"]
    assert "ctx.patched:swap-b-c" not in order(old)
    assert "ctx.patched:swap-b-c" in order(new)
    assert query(pg_url, "select step_id from automation.step_attempts where run_id = $1 and step_id in "
                         "('b', 'c') and status = 'succeeded' order by step_id", new) == [("b",), ("c",)]
    assert mod.CALLS == ["a", "b", "a", "c", "c", "b"]


def test_yaml_histories_are_compared_by_step_id_kind_and_order(tmp_path):
    from anthares44.automation.compiler.lint import lint_paths

    src = tmp_path / "wf.yaml"
    src.write_text(YAML.format(first="load", second="publish"))
    ir = next(ir for ir in lint_paths([str(src)], lower=True).irs.values() if hasattr(ir, "nodes"))
    run = {"run_id": "r1", "workflow_id": ir.workflow_id, "version": 1, "state": "succeeded"}
    done = [{"step_id": s, "kind": "action", "status": "succeeded"} for s in ("load", "publish")]
    assert yaml_divergence(ir, run, done) is None
    got = yaml_divergence(ir, run, list(reversed(done)))
    assert got is not None and (got.step, got.history_has) == ("load", "publish")
    got = yaml_divergence(ir, run, done + [{"step_id": "gone", "kind": "action", "status": "succeeded"}])
    assert got is not None and got.step == "gone" and "no such step" in got.message
    got = yaml_divergence(ir, run, [{"step_id": "load", "kind": "action", "status": "succeeded",
                                     "due_at": "2026-07-19T14:00:00Z"}])
    assert got is not None and "sleep step" in got.message


YAML = '''name: nightly-load
version: 1
steps:
  - id: {first}
    uses: pass
    timeout: 1s
  - id: {second}
    uses: pass
    timeout: 1s
'''


def test_a_run_moved_to_a_version_that_swaps_its_steps_is_blocked_at_its_next_visit(store, clock, aio, tmp_path,
                                                                                   pg_url):
    auto = aio(published_code(store, tmp_path, "swap_m1.py", V1.replace("PATCH", "False")))
    run_id = aio(auto.run("swapflow", {"n": 1}, "moved")).run_id
    eng = engine(store, clock=clock)
    aio(eng.drive())
    assert aio(store.get_run(run_id))["state"] == "sleeping"
    (tmp_path / "swap_m2.py").write_text(V2)
    assert aio(auto.publish([str(tmp_path / "swap_m2.py")])).ok
    # the stand-in for `runs migrate --to 2` (w-plan's verb): the run now belongs to the version that swaps b, c
    query(pg_url, "update automation.runs set version = 2 where run_id = $1", run_id)
    clock.advance(timedelta(seconds=11))
    aio(eng.drive())
    run = aio(store.get_run(run_id))
    assert (run["state"], run["version"], run["failed_step"]) == ("blocked_version", 2, "c")
    assert import_path(tmp_path / "swap_m2.py").CALLS == []       # v2 ran nothing of its own
