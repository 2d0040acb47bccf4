"""`GET /metrics` and `a44 automation metrics` (docs/metrics.md) against real processes: a `serve` daemon with its
HTTP plane and an `ingest` HTTP plane on one database, runs that succeed, fail and retry, a lease re-granted by
the daemon's claim, dead letters, refused webhooks. Every value is parsed with prometheus_client's parser and
compared with a count taken in SQL; the system values agree across planes and the CLI and survive a restart."""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path

from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from anthares44.automation.app.publishing import publish
from anthares44.automation.clock import SystemClock
from anthares44.automation.compiler.ir import to_json
from anthares44.automation.runtime.postgres.embedded import free_port
from anthares44.automation.runtime.queues import deliver_envelope
from anthares44.automation.runtime.store.core import Store
from tests.ingestion.support import P, request, signed_headers, write_project
from tests.loopback import ThreadedServer
from tests.runtime.daemon_support import A44, ServeProcess, call, wait_until
from tests.runtime.engine_support import workflow
from tests.runtime.pg import query as sql

SYSTEM = ("automation_dlq_depth", "automation_oldest_message_age_seconds", "automation_queue_waiting",
          "automation_runs", "automation_lease_reclaim", "automation_step_attempts", "automation_step_retries",
          "automation_step_duration_seconds", "automation_webhook_rejected")
REJECTED = 3


class Upstream(ThreadedServer):
    """/ok answers 200; /flaky 503 on the first hit of each Idempotency-Key, then 200; /bad 400."""

    def __init__(self):
        self.hits: Counter[str] = Counter()
        super().__init__()

    def routes(self, app):
        app.router.add_post("/{kind}", self._hit)

    async def _hit(self, request):
        kind, key = request.match_info["kind"], request.headers.get("Idempotency-Key", "")
        self.hits[f"{kind}:{key}"] += 1
        if kind == "bad" or (kind == "flaky" and self.hits[f"{kind}:{key}"] == 1):
            return web.json_response({"no": True}, status=400 if kind == "bad" else 503)
        return web.json_response({"ok": True})


async def _setup(url: str, home: Path, up: Upstream) -> None:
    store = await Store.connect(url, clock=SystemClock(), results_dir=home / "results")
    try:
        await store.migrate()
        await store.ensure_partitions()
        report = await publish(store, P, write_project(home / "proj"))
        assert report.ok
        for name in ("ok", "flaky", "bad"):
            ir = workflow([call("first", "http", {"method": "POST", "url": f"{up.url}/ok"}),
                           call("second", "http", {"method": "POST", "url": f"{up.url}/{name}"}, retries=2)],
                          name=name)
            await store.publish_version(P, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
            for i in range(2):
                await store.create_run(P, ir.workflow_id, {}, f"{name}-{i}")
        ghost = await store.create_run(P, "wf_ok", {}, "ghost")      # a daemon died holding it: its lease expired
        await store.pool.execute("update automation.runs set state = 'running', lease_owner = 'ghost', lease_grants = 1,"
                                 " lease_deadline = now() - interval '1 s', next_wake_at = now() - interval '1 s'"
                                 " where run_id = $1", ghost.run_id)
        later = await store.create_run(P, "wf_ok", {}, "later", queue="q_later")   # waits: due in an hour
        await store.pool.execute("update automation.runs set next_wake_at = now() + interval '1 h',"
                                 " created_at = now() - interval '90 s' where run_id = $1", later.run_id)
        for i in range(2):
            await deliver_envelope(store, P, "wf_ok", b"not json %d" % i)
    finally:
        await store.close()


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    """Every sample of /metrics: family -> {(sample name, sorted labels): value}, parsed by prometheus_client."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(fam.name, {})[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def values(metrics, family: str, *labels: str) -> dict[tuple, float]:
    """{label values: value} of one family's plain samples (histograms: their _count)."""
    out = {}
    for (name, lb), v in metrics.get(family, {}).items():
        if name.endswith(("_bucket", "_sum", "_created")):
            continue
        d = dict(lb)
        out[tuple(d[k] for k in labels)] = v
    return out


def system(metrics) -> dict:
    return {f: {k: v for k, v in metrics.get(f, {}).items()} for f in SYSTEM
            if f != "automation_oldest_message_age_seconds"}


def ingest(url: str, home: Path, port: int) -> subprocess.Popen:
    env = {"A44_DATABASE_URL": url, "A44_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.Popen([A44, "automation", "ingest", "--http-port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _up(port: int) -> bool:
    try:
        return request(port, "GET", "/healthz")[0] == 200
    except OSError:
        return False


def test_metrics_equal_sql_counts_across_planes_cli_and_restarts(pg_url, tmp_path):
    up = Upstream()
    asyncio.run(_setup(pg_url, tmp_path, up))
    port, port2 = free_port(), free_port()
    daemon = ServeProcess(pg_url, tmp_path, worker_id="m1", extra=["--http-port", str(port)])
    plane2 = None
    try:
        wait_until(lambda: _up(port), 30, "the daemon's HTTP plane")
        wait_until(lambda: sql(pg_url, "select count(*) from automation.runs where queue is distinct from 'q_later'"
                                       " and state not in ('succeeded', 'failed', 'compensation_failed',"
                                       " 'cancelled')")[0][0] == 0, 60,
                   "every due run to finish")
        body = b'{"n": 1}'
        for _ in range(REJECTED):
            assert request(port, "POST", f"/v1/{P}/trg_hook", body, signed_headers("whsec_wrong", body))[0] == 401

        m = scrape(port)
        # the manual's three signals, equal to SQL
        dlq = {(r[0], r[1]): r[2] for r in sql(pg_url, "select project_id, coalesce(queue, 'q_default'), count(*)"
                                                      " from automation.dead_letters where redriven_at is null group by 1, 2")}
        assert dlq == {(P, "q_default"): 2}
        assert {k: v for k, v in values(m, "automation_dlq_depth", "project", "queue").items() if v} == dlq
        reclaims = dict(sql(pg_url, "select project_id, sum(lease_reclaims) from automation.runs group by 1"))
        assert reclaims == {P: 1}
        assert values(m, "automation_lease_reclaim", "project") == {(P,): 1}
        ages = values(m, "automation_oldest_message_age_seconds", "project", "queue")
        (sql_age,) = sql(pg_url, "select extract(epoch from now() - min(created_at))::float8 from automation.runs"
                                 " where state = 'pending' and queue = 'q_later'")[0]
        assert 90 <= ages[(P, "q_later")] <= sql_age + 1
        assert values(m, "automation_queue_waiting", "project", "queue")[(P, "q_later")] == 1

        runs = {(r[0], r[1]): r[2] for r in sql(pg_url, "select workflow_id, state, count(*) from automation.runs"
                                                       " group by 1, 2")}
        assert runs[("wf_bad", "failed")] == 2 and runs[("wf_flaky", "succeeded")] == 2
        assert {(w, s): v for (p, w, s), v in values(m, "automation_runs", "project", "workflow", "state").items()} == runs
        attempts = {tuple(r[:4]): r[4] for r in sql(pg_url,
                    "select r.workflow_id, a.step_id, a.kind, a.status, count(*) from automation.step_attempts a"
                    " join automation.runs r using (run_id) where a.status <> 'running' group by 1, 2, 3, 4")}
        assert attempts[("wf_flaky", "second", "action", "failed")] == 2       # the 503 before the retry
        got = values(m, "automation_step_attempts", "workflow", "step", "kind", "status")
        assert got == attempts
        retries = {tuple(r[:2]): r[2] for r in sql(pg_url,
                   "select r.workflow_id, a.step_id, count(*) from automation.step_attempts a"
                   " join automation.runs r using (run_id) where a.attempt > 1 group by 1, 2")}
        assert retries == {("wf_flaky", "second"): 2}
        assert {k[:2]: v for k, v in values(m, "automation_step_retries", "workflow", "step", "status").items()} == retries
        assert values(m, "automation_step_duration_seconds", "workflow", "step", "kind", "status") == attempts
        inf = {k: v for (n, k), v in m["automation_step_duration_seconds"].items()
               if n.endswith("_bucket") and dict(k)["le"] == "+Inf"}
        assert sum(inf.values()) == sum(attempts.values())
        for le in ("0.01", "0.25", "1.0"):
            within = {tuple(r[:4]): r[4] for r in sql(pg_url,
                      "select r.workflow_id, a.step_id, a.kind, a.status, count(*) from automation.step_attempts a"
                      " join automation.runs r using (run_id) where a.status <> 'running'"
                      " and a.finished_at - a.started_at <= $1::float8 * interval '1 s' group by 1, 2, 3, 4", float(le))}
            got = {tuple(dict(k)[x] for x in ("workflow", "step", "kind", "status")): v
                   for (n, k), v in m["automation_step_duration_seconds"].items()
                   if n.endswith("_bucket") and dict(k)["le"] == le and v}
            assert got == within, le
        # refused webhooks: this process's counter (worker label) and the persisted total
        assert values(m, "automation_webhook_rejected", "reason") == {("bad_signature",): REJECTED}
        assert sql(pg_url, "select value from automation.metric_counters where name = 'webhook_rejected_total'")[0][0] \
            == REJECTED
        local = values(m, "webhook_rejected", "reason", "worker")
        assert list(local.values()) == [REJECTED] and list(local)[0][1].endswith(f":{daemon.proc.pid}")

        # a second HTTP plane on the same database shows the same system values
        plane2 = ingest(pg_url, tmp_path, port2)
        wait_until(lambda: _up(port2), 30, "the ingest HTTP plane")
        assert system(scrape(port2)) == system(m)
        # the CLI prints the same numbers
        out = subprocess.run([A44, "automation", "metrics", "--format", "json"], capture_output=True, text=True,
                             env={"A44_DATABASE_URL": pg_url, "A44_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                             timeout=60)
        assert out.returncode == 0, out.stderr
        cli = {}
        for r in json.loads(out.stdout)["metrics"]:
            cli.setdefault(r["name"], {})[tuple(sorted(r["labels"].items()))] = r["value"]
        for fam in system(m).values():
            for (name, lb), v in fam.items():
                assert cli[name][lb] == v, (name, lb)
        table = subprocess.run([A44, "automation", "metrics", "--name", "automation_dlq_depth"], capture_output=True,
                               text=True, env={"A44_DATABASE_URL": pg_url, "PATH": "/usr/bin:/bin",
                                               "A44_HOME": str(tmp_path)}, timeout=60)
        assert table.returncode == 0 and f"project={P},queue=q_default  2" in table.stdout, table.stdout + table.stderr

        # values survive a restart: the daemon stops, a new one starts; its own counters start again from 0
        assert daemon.term() == 0
        daemon.stop()
        daemon = ServeProcess(pg_url, tmp_path, worker_id="m2", extra=["--http-port", str(port)])
        wait_until(lambda: _up(port), 30, "the restarted daemon's HTTP plane")
        again = scrape(port)
        assert system(again) == system(m)
        assert "webhook_rejected" not in again
    finally:
        daemon.stop()
        if plane2 is not None:
            plane2.kill()
            plane2.wait(10)
        up.close()
