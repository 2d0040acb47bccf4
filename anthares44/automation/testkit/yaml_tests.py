"""Declarative tests: `*.a44test.yaml` files, run by `a44 automation test DIR` for teams who do not write Python.

A file publishes workflow files (paths relative to it) and lists cases; each case runs in a fresh `Env`:

    publish: [../workflows/charge-order.yaml]
    tests:
      - name: a charge that fails five times then succeeds
        start: "2026-07-19T14:02:11Z"        # where the virtual clock starts (optional)
        mocks:                               # per `uses:`, one outcome per call of each step, the last repeats
          connector/payments.charge: [{fail: E_UPSTREAM_503}, {fail: E_UPSTREAM_503}, {ok: {charge: ch_1}}]
        run: {workflow: charge-order, input: {amount: 12}, idempotencyKey: order-1}
        advance: 10m                         # or `untilIdle: 400d` (the default)
        expect:
          state: succeeded
          steps: {charge: succeeded}         # each step's latest status
          output: {...}                      # the run's result, exactly
          calls:                             # per `uses:`: how many calls, or the calls (each key listed must match)
            connector/payments.charge: 3

`run_file` / `run_dir` return a `CaseResult` per case (passed, what failed, wall and virtual time); `text_report`
and `junit_report` format them.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..compiler.lint import TEST_FILE_SUFFIX
from ..errors import A44Error

SUFFIX = TEST_FILE_SUFFIX
CASE_KEYS = {"name", "start", "mocks", "run", "advance", "untilIdle", "expect", "project"}
EXPECT_KEYS = {"state", "steps", "output", "calls", "errorCode"}


@dataclass
class CaseResult:
    file: str
    name: str
    failures: list[str] = field(default_factory=list)
    error: str | None = None          # the case could not run (a bad file, a refused publish)
    wall_s: float = 0.0
    virtual: str = ""                 # how far the virtual clock moved, e.g. "3 days, 0:00:12"

    @property
    def passed(self) -> bool:
        return not self.failures and self.error is None

    def to_dict(self) -> dict:
        return {"file": self.file, "name": self.name, "passed": self.passed, "failures": self.failures,
                "error": self.error, "wall_s": round(self.wall_s, 3), "virtual": self.virtual}


def _load(path: Path) -> tuple[list[str], list[dict]]:
    from ruamel.yaml import YAML  # a declared dependency (PyYAML is not): the safe loader, plain values only

    doc = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(doc, dict):
        raise ValueError("a test file is a mapping with `publish` and `tests`")
    publish = [str((path.parent / p).resolve()) for p in doc.get("publish") or []]
    cases = doc.get("tests")
    if cases is None:          # one case at the top level
        cases = [{k: v for k, v in doc.items() if k != "publish"}]
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ValueError("`tests` is a list of cases")
    for c in cases:
        unknown = set(c) - CASE_KEYS
        if unknown:
            raise ValueError(f"unknown key(s) in case {c.get('name')!r}: {', '.join(sorted(unknown))}; "
                             f"a case has {', '.join(sorted(CASE_KEYS))}")
        unknown = set(c.get("expect") or {}) - EXPECT_KEYS
        if unknown:
            raise ValueError(f"unknown expectation(s) in case {c.get('name')!r}: {', '.join(sorted(unknown))}; "
                             f"expect: takes {', '.join(sorted(EXPECT_KEYS))}")
    return publish, cases


def _matches(want: Any, got: Any) -> bool:
    """Every key `want` lists has that value in `got` (recursively for mappings); other values: equal."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _matches(v, got[k]) for k, v in want.items())
    return want == got


def check(env, run, expect: dict) -> list[str]:
    """What of `expect` the run does not meet (empty: all)."""
    out: list[str] = []
    row = run.row
    if "state" in expect and row["state"] != expect["state"]:
        out.append(f"state: expected {expect['state']}, got {row['state']}"
                   + (f" ({row['error_code']}: {row['error_message']})" if row.get("error_code") else ""))
    if "errorCode" in expect and row.get("error_code") != expect["errorCode"]:
        out.append(f"errorCode: expected {expect['errorCode']}, got {row.get('error_code')}")
    if "steps" in expect:
        steps = run.steps
        for step, status in expect["steps"].items():
            if steps.get(step) != status:
                out.append(f"step {step}: expected {status}, got {steps.get(step, 'not started')}")
    if "output" in expect and row.get("result") != expect["output"]:
        out.append(f"output: expected {expect['output']!r}, got {row.get('result')!r}")
    for uses, want in (expect.get("calls") or {}).items():
        mock = env.registry.mocks.get(uses)
        calls = mock.calls_of(run.id) if mock is not None else []
        if isinstance(want, int):
            if len(calls) != want:
                out.append(f"calls of {uses}: expected {want}, got {len(calls)}")
            continue
        if len(calls) != len(want):
            out.append(f"calls of {uses}: expected {len(want)}, got {len(calls)}")
            continue
        for i, (w, c) in enumerate(zip(want, calls), 1):
            got = {"attempt": c.attempt, "step": c.step_id, "params": c.params, "idempotencyKey": c.idempotency_key}
            if not _matches(w, got):
                out.append(f"call {i} of {uses}: expected {w!r}, got {got!r}")
    return out


def run_case(postgres, file: Path, publish: list[str], case: dict) -> CaseResult:
    """One case in a fresh Env (its own databases, the socket guard on)."""
    from .databases import AppDatabases
    from .env import Env
    from .guard import socket_guard

    name = str(case.get("name") or "unnamed")
    result = CaseResult(str(file), name)
    began = time.monotonic()
    url = postgres.clone()
    project = case.get("project", "pj_default")
    apps = AppDatabases(postgres.admin_url)
    try:
        apps.url(project)
        with tempfile.TemporaryDirectory(prefix="a44test-") as tmp, socket_guard([postgres.port]):
            with Env(url, app_database_url=apps.template, tmp=Path(tmp), project=project,
                     start=case.get("start"), postgres=postgres) as env:
                start = env.now
                for uses, script in (case.get("mocks") or {}).items():
                    env.mock(uses, *(script if isinstance(script, list) else [script]))
                env.publish(*publish)
                spec = case.get("run") or {}
                if "workflow" not in spec:
                    raise ValueError("`run:` needs `workflow` (and usually `input`)")
                run = env.run(spec["workflow"], spec.get("input"), idempotency_key=spec.get("idempotencyKey"))
                if "advance" in case:
                    env.advance(case["advance"])
                else:
                    env.run_until_idle(case.get("untilIdle", "400d"))
                result.failures = check(env, run, case.get("expect") or {})
                result.virtual = str(env.now - start)
    except (AssertionError, ValueError, OSError, A44Error) as exc:     # the case could not run as written
        result.error = f"{exc.code}: {exc.message}" if isinstance(exc, A44Error) else str(exc)
    finally:
        apps.drop()
        postgres.drop(url)
    result.wall_s = time.monotonic() - began
    return result


def find_test_files(paths: list[str]) -> list[Path]:
    """The `*.a44test.yaml` files of `paths` (files or directories, searched recursively), sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found.update(p.rglob("*" + SUFFIX))
        elif p.exists():
            found.add(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    return sorted(found)


def run_paths(paths: list[str], postgres=None) -> list[CaseResult]:
    """Every case of every test file under `paths`, on `postgres` (None: a server started for this call)."""
    from .databases import TestPostgres

    files = find_test_files(paths)
    own = postgres is None
    postgres = postgres or TestPostgres.start()
    results: list[CaseResult] = []
    try:
        for f in files:
            try:
                publish, cases = _load(f)
            except Exception as exc:  # noqa: BLE001 - a broken file is one failed entry, the others still run
                results.append(CaseResult(str(f), "(file)", error=f"{type(exc).__name__}: {exc}"))
                continue
            results.extend(run_case(postgres, f, publish, c) for c in cases)
    finally:
        if own:
            postgres.stop()
    return results


def text_report(results: list[CaseResult]) -> str:
    lines = []
    for r in results:
        mark = "PASS" if r.passed else ("ERROR" if r.error else "FAIL")
        lines.append(f"{mark}  {r.file} :: {r.name}  ({r.wall_s:.2f}s wall, {r.virtual or '0:00:00'} virtual)")
        for f in ([r.error] if r.error else []) + r.failures:
            lines.append(f"      {f}")
    passed = sum(r.passed for r in results)
    lines.append(f"{passed} passed, {len(results) - passed} failed")
    return "\n".join(lines) + "\n"


def junit_report(results: list[CaseResult]) -> str:
    suite = ElementTree.Element("testsuite", name="a44 automation test", tests=str(len(results)),
                                failures=str(sum(bool(r.failures) and r.error is None for r in results)),
                                errors=str(sum(r.error is not None for r in results)),
                                time=f"{sum(r.wall_s for r in results):.3f}")
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname=r.file, name=r.name, time=f"{r.wall_s:.3f}")
        if r.error is not None:
            ElementTree.SubElement(case, "error", message=r.error).text = r.error
        elif r.failures:
            ElementTree.SubElement(case, "failure", message=r.failures[0]).text = "\n".join(r.failures)
    ElementTree.indent(suite)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
