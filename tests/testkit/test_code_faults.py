"""`kill_worker(at="after_effect_before_record")` on a code workflow's step (testkit/faults.py, code_visit.py): the
step's body ran (its effect is done), the worker dies before the outcome is recorded; after the lease expires on
virtual time the step runs again -- with the same idempotency key -- and the run completes."""

from __future__ import annotations

CODE = '''from anthares44.automation import step, workflow


def _charge(path, key):
    with open(path, "a") as f:          # the effect: one line per call of the step's body
        f.write(key + "\\n")
    return {"charged": True}


@workflow("code-pay", version=1)
async def pay(ctx, input):
    return await step.run("charge", timeout="10s", fn=lambda: _charge(input["ledger"], ctx.idempotency_key))
'''


def test_a_code_step_killed_after_its_effect_runs_again_and_the_run_completes(a44_env, tmp_path):
    env = a44_env
    src = tmp_path / "code_pay.py"
    src.write_text(CODE)
    env.publish(src)
    env.kill_worker(at="after_effect_before_record", step="charge")
    ledger = tmp_path / "ledger.txt"
    run = env.run("code-pay", {"ledger": str(ledger)}, idempotency_key="order-1")

    idle = env.run_until_idle(max_virtual="1h")

    assert idle.reason == "idle", str(idle)
    assert run.state == "succeeded" and run.result == {"charged": True}
    assert [(k.run_id, k.step_id, k.attempt) for k in env.faults.kills] == [(run.id, "charge", 1)]
    assert [a["status"] for a in run.attempts("charge")] == ["lease_expired", "succeeded"]
    assert ledger.read_text().splitlines() == [f"{run.id}:charge"] * 2     # the effect twice, the same key
    # the second attempt began when the dead worker's lease (30 s) expired on virtual time
    first, second = run.attempts("charge")
    assert (second["started_at"] - first["started_at"]).total_seconds() >= 30
