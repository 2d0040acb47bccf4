"""Restate as the benchmark's second peer (helper of bench_runtime.py): the Restate server from npm
(`@restatedev/restate-server`, a Rust binary with its own log, default durability) and the benchmark's three
workflows as a Restate Python service (bench/runtime_restate_app.py) served by hypercorn in a process of its own,
both from bench/.peers/ (`bash bench/install_peers.sh`; absent: `missing()` says what to run, nothing crashes).

Driven as the a44 side is: the service process is paused (SIGSTOP) while RUNS invocations are queued on the
server (`POST /Bench/<workflow>/send`, durable once accepted), then resumed; runs/s = RUNS / (resume .. the last
run's end, as the service saw it). One run at a time: `POST /Bench/<workflow>` (the ingress answers with the
result), client-observed p50/p99. CPU per run of the server and of the service process (/proc).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from proc_cpu import pg_cpu_s, pid_cpu_s

from anthares44.automation.runtime.postgres.embedded import free_port

PEERS = Path(__file__).resolve().parent / ".peers"
PY = PEERS / "venv" / "bin" / "python"
# the binary itself (node_modules/.bin/restate-server is a node launcher: its CPU would not be the server's)
SERVER = next(iter(sorted((PEERS / "node" / "node_modules" / "@restatedev").glob("restate-server-*/bin/restate-server"))),
              PEERS / "node" / "node_modules" / ".bin" / "restate-server")
INSTALL = "bash bench/install_peers.sh"


def missing() -> str | None:
    """None when the Restate server and the Python SDK are installed, else what to run."""
    if not SERVER.exists() or not PY.exists():
        return f"Restate peer not installed: run `{INSTALL}`"
    got = subprocess.run([str(PY), "-c", "import restate, hypercorn, aiohttp, asyncpg"], capture_output=True)
    return None if got.returncode == 0 else f"Restate peer not installed (restate-sdk/hypercorn): run `{INSTALL}`"


def version() -> str:
    got = subprocess.run([str(SERVER), "--version"], capture_output=True, text=True)
    sdk = subprocess.run([str(PY), "-c", "import importlib.metadata as m; print(m.version('restate-sdk'))"],
                         capture_output=True, text=True)
    return f"{got.stdout.strip()} (Python SDK {sdk.stdout.strip()})"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class RestatePeer:
    """A Restate server and the bench's service, registered; `stop()` ends both and removes the server's data."""

    def __init__(self, root: Path, far_port: int, app_url: str, postmaster: int):
        self.root, self.postmaster = root, postmaster
        self.dir = root / "restate"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ingress, self.admin, self.fabric, self.sdk_port = (free_port() for _ in range(4))
        env = {**os.environ, "DO_NOT_TRACK": "1", "RESTATE_LISTEN_MODE": "tcp",
               "RESTATE_BASE_DIR": str(self.dir), "RESTATE_NODE_NAME": "bench",
               "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{self.ingress}",
               "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{self.admin}",
               "RESTATE_BIND_ADDRESS": f"127.0.0.1:{self.fabric}",
               "RESTATE_ADVERTISED_ADDRESS": f"http://127.0.0.1:{self.fabric}"}
        self.server_log = open(self.dir / "server.log", "w")
        self.server = subprocess.Popen([str(SERVER), "--no-logo"], env=env, stdout=self.server_log,
                                       stderr=subprocess.STDOUT, cwd=self.dir)
        app_env = {**os.environ, "FAR_SIDE_PORT": str(far_port), "APP_DATABASE_URL": app_url}
        app_env.pop("PYTHONPATH", None)
        self.app_log = open(self.dir / "app.log", "w")
        self.app = subprocess.Popen([str(PY), str(Path(__file__).resolve().parent / "runtime_restate_app.py"),
                                     str(self.sdk_port)], env=app_env, stdout=self.app_log,
                                    stderr=subprocess.STDOUT)
        asyncio.run(self._register())

    async def _register(self) -> None:
        deadline = time.monotonic() + 90
        async with aiohttp.ClientSession() as s:
            while True:
                try:
                    async with s.get(f"http://127.0.0.1:{self.admin}/health") as r:
                        if r.status == 200:
                            async with s.get(f"http://127.0.0.1:{self.sdk_port}/bench/done") as r2:
                                if r2.status == 200:
                                    break
                except aiohttp.ClientError:
                    pass
                if time.monotonic() > deadline or self.server.poll() is not None or self.app.poll() is not None:
                    raise RuntimeError(f"Restate did not start: {(self.dir / 'server.log').read_text()[-1500:]} "
                                       f"{(self.dir / 'app.log').read_text()[-1500:]}")
                await asyncio.sleep(0.2)
            while True:     # the admin may answer /health before the cluster is provisioned
                async with s.post(f"http://127.0.0.1:{self.admin}/deployments",
                                  json={"uri": f"http://127.0.0.1:{self.sdk_port}"}) as r:
                    if r.status < 300:
                        break
                    text = await r.text()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Restate refused the deployment: {text[:500]}")
                await asyncio.sleep(0.5)
            while True:     # the ingress learns the service a moment after registration
                async with s.post(f"http://127.0.0.1:{self.ingress}/Bench/pass", json=-1) as r:
                    if r.status == 200:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Restate ingress answers {r.status}")
                await asyncio.sleep(0.2)

    def cpu_s(self) -> tuple[float, float]:
        return pid_cpu_s(self.server.pid), pid_cpu_s(self.app.pid)

    async def _done(self, s: aiohttp.ClientSession, reset: bool = False) -> dict:
        async with s.post(f"http://127.0.0.1:{self.sdk_port}/bench/{'reset' if reset else 'done'}") as r:
            return await r.json()

    async def throughput(self, workflow: str, n: int, senders: int = 32) -> dict:
        """n invocations queued while the service is paused, then drained."""
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=senders)) as s:
            await self._done(s, reset=True)
            self.app.send_signal(signal.SIGSTOP)
            try:
                sem = asyncio.Semaphore(senders)
                url = f"http://127.0.0.1:{self.ingress}/Bench/{workflow}/send"

                async def one(i):
                    async with sem, s.post(url, json=i) as r:
                        if r.status >= 300:
                            raise RuntimeError(f"Restate send answered {r.status}: {await r.text()}")

                t_create = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(n)))
                create_s = n / (time.perf_counter() - t_create)
                (srv0, app0), pg0 = self.cpu_s(), pg_cpu_s(self.postmaster)
                t0 = time.time()
            finally:
                self.app.send_signal(signal.SIGCONT)
            while True:
                await asyncio.sleep(0.05)
                got = await self._done(s)
                if got["n"] >= n:
                    break
                if time.time() - t0 > 600:
                    raise RuntimeError(f"Restate: {got['n']} of {n} runs done in 10 minutes")
            (srv1, app1), pg1 = self.cpu_s(), pg_cpu_s(self.postmaster)
        elapsed = got["last"] - t0
        return {"runs_s": n / elapsed, "elapsed_s": elapsed, "create_s": create_s,
                "server_cpu_ms_per_run": (srv1 - srv0) * 1000 / n, "sdk_cpu_ms_per_run": (app1 - app0) * 1000 / n,
                "pg_cpu_ms_per_run": (pg1 - pg0) * 1000 / n}

    async def latency(self, workflow: str, n: int, warm: int = 20) -> dict:
        """One run at a time (the ingress answers with the result), idle 10 ms in between; `warm` first."""
        lat = []
        async with aiohttp.ClientSession() as s:
            url = f"http://127.0.0.1:{self.ingress}/Bench/{workflow}"
            for i in range(warm + n):
                t = time.perf_counter()
                async with s.post(url, json=1_000_000 + i) as r:
                    await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"Restate call answered {r.status}")
                if i >= warm:
                    lat.append((time.perf_counter() - t) * 1000)
                await asyncio.sleep(0.01)
        return {"lat_p50": statistics.median(lat), "lat_p99": pct(lat, 99)}

    def stop(self) -> None:
        for p in (self.app, self.server):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        self.server_log.close()
        self.app_log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _self_test(far_port: int, app_url: str) -> None:     # python bench/runtime_restate.py FAR_PORT APP_URL
    import tempfile

    peer = RestatePeer(Path(tempfile.mkdtemp(prefix="a44-restate-")), far_port, app_url, os.getpid())
    try:
        print(asyncio.run(peer.throughput("pass", 200)))
        print(asyncio.run(peer.latency("pass", 20)))
    finally:
        peer.stop()


if __name__ == "__main__":
    _self_test(int(sys.argv[1]), sys.argv[2])
