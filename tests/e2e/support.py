"""Helpers of the end-to-end tests: the example payments plugin made importable by subprocesses as a real
distribution (a `*.dist-info` with its entry points beside the plugin's `src/` on PYTHONPATH, exactly what
importlib.metadata reads for a pip-installed one; nothing is faked), the plugin's stand-in payments API as a
subprocess, `a44 automation serve` as a subprocess, and the `a44` CLI."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLUGIN = EXAMPLES / "plugins" / "a44-payments"
A44 = shutil.which("a44", path=os.path.dirname(sys.executable)) or shutil.which("a44")
GROUP = "anthares44.automation.connectors"


def install_payments_plugin(tmp_path: Path) -> list[str]:
    """A dist-info for a44-payments generated from its pyproject.toml; returns the PYTHONPATH entries
    (the dist-info's directory and the plugin's src/)."""
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    project = meta["project"]
    site = tmp_path / "plugin-site"
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    eps = project["entry-points"][GROUP]
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    (info / "top_level.txt").write_text("a44_payments\n")
    return [str(site), str(PLUGIN / "src")]


def e2e_env(tmp_path: Path, *, database_url: str | None, plugin: bool = True, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("A44_") and k != "NO_COLOR"}
    home = tmp_path / "a44-home"
    home.mkdir(exist_ok=True)
    env.update({"A44_HOME": str(home), "PYTHONUNBUFFERED": "1",
                "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")})
    if database_url:
        env["A44_DATABASE_URL"] = database_url
    if plugin:
        env["PYTHONPATH"] = os.pathsep.join([*install_payments_plugin(tmp_path),
                                             *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def a44(*args: str, env: dict, cwd: Path = EXAMPLES, timeout: float = 60) -> subprocess.CompletedProcess:
    assert A44, "the a44 console script is not installed in this environment"
    return subprocess.run([A44, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


class Proc:
    """A background subprocess with its output in a file; `wait_for(text)` until a line appears."""

    def __init__(self, argv: list[str], env: dict, log: Path, cwd: Path = EXAMPLES):
        self.log = log
        self._fh = open(log, "w")
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=self._fh, stderr=subprocess.STDOUT)

    def output(self) -> str:
        self._fh.flush()
        return self.log.read_text()

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.output()
            for line in out.splitlines():
                if text in line:
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.proc.args} exited {self.proc.returncode}:\n{out}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {text!r} from {self.proc.args}:\n{self.output()}")

    def stop(self, timeout: float = 20) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._fh.close()
        return self.proc.returncode


class StandIn(Proc):
    """`python -m a44_payments.standin --port 0` (the plugin's own stand-in of the payments API)."""

    def __init__(self, env: dict, log: Path, *args: str):
        super().__init__([sys.executable, "-m", "a44_payments.standin", "--port", "0", *args], env, log)
        self.url = self.wait_for("listening on").split("listening on ")[1].strip()

    def state(self) -> dict:
        with urllib.request.urlopen(self.url + "/_standin/state", timeout=10) as resp:
            return json.load(resp)

    def fail(self, **rule) -> None:
        req = urllib.request.Request(self.url + "/_standin/fail", data=json.dumps(rule).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).close()


class Serve(Proc):
    def __init__(self, env: dict, log: Path, *args: str):
        super().__init__([A44, "automation", "serve", "-vv", *args], env, log)
        self.wait_for("serving worker=")


def sql(url: str, statement: str, *args):
    async def go():
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetch(statement, *args)
        finally:
            await conn.close()

    return asyncio.run(go())
