"""A sleeping run over REST and the CLI (§19, docs/timers.md): its due instant in `GET /runs/{id}`, `runs RUN`
and `logs RUN --format json`; `runs wake` / `runs reschedule` (POST /runs/{id}/wake, /reschedule) audited with the
calling token's name, refused with 409 when the step is not sleeping, 422 past the run's deadline; the local and
remote CLI print the same documents."""

from __future__ import annotations

from datetime import timedelta

from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.engine import Engine
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.ingestion.support import P
from tests.partitions.support import compile_yaml

from .support import api, target  # noqa: F401 - the fixtures
from .test_parity import _same, both  # noqa: F401 - the fixture

YAML = """\
name: nap
version: 1
steps:
  - id: nap
    sleep: 1h
  - id: after
    uses: pass
    timeout: 15s
"""


async def _sleeping(store, ir, keys: list[str]) -> list[str]:
    await store.publish_version(P, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
    runs = [(await store.create_run(P, ir.workflow_id, {}, k)).run_id for k in keys]
    await Engine(store, ConnectorRegistry(), worker_id="w1").drive()
    return runs


def test_a_sleeping_runs_due_instant_is_shown_and_a_wake_is_audited(api, both, tmp_path):
    ir = compile_yaml(tmp_path, YAML)
    woken, moved = api.live.call(_sleeping, ir, ["k1", "k2"])
    s, run = api("GET", f"/runs/{woken}")
    assert s == 200 and run["state"] == "sleeping"
    assert [t["step_id"] for t in run["timers"]] == ["nap"] and run["due_at"] == run["timers"][0]["due_at"]
    shown = _same(both, "automation", "runs", woken, drop=("duration_ms",))
    assert shown["due_at"] == run["due_at"]
    (attempt,) = _same(both, "automation", "logs", woken, drop=("run",))["attempts"]
    assert attempt["due_at"] == run["due_at"]

    s, doc = api("POST", f"/runs/{woken}/wake", {"step": "nap", "reason": "ops asked"}, as_="write")
    assert s == 200 and (doc["event"], doc["by"], doc["reason"]) == ("timer.woken", "token:t-write", "ops asked")
    s, doc = api("POST", f"/runs/{woken}/wake", {"step": "after", "reason": "no"}, as_="write")
    assert s == 409 and doc["error"]["code"] == "E_TIMER_NOT_SLEEPING"

    s, doc = api("POST", f"/runs/{moved}/reschedule", {"step": "nap", "until": "2099-01-01T00:00:00Z"}, as_="write")
    assert s == 422 and doc["error"]["code"] == "E_SLEEP_EXCEEDS_RUN_DEADLINE"
    until = (api.live.clock.now() + timedelta(hours=2)).isoformat()
    s, doc = api("POST", f"/runs/{moved}/reschedule", {"step": "nap", "until": until, "reason": "later"},
                 as_="write")
    assert s == 200 and doc["event"] == "timer.rescheduled"
    s, run = api("GET", f"/runs/{moved}")
    assert run["due_at"] == doc["due_at"]
    s, logs = api("GET", f"/runs/{moved}/logs")
    assert s == 200
