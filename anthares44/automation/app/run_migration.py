"""Explicit version moves (§23, docs/deploys.md): `runs migrate` moves the open runs of a workflow to a newer
published version, one by one under each run's lock (runtime/run_moves.py), at most `rate` a second; `versions`
lists each version with its open runs; `versions retire` forgets a drained version (refused while runs are open,
E_VERSION_HAS_OPEN_RUNS, unless `migrate_to` moves them first).

A run another transaction holds (`busy`) or whose lease a worker holds (`held`) is left alone and tried again,
up to `passes` passes a little apart; one still held after them is reported `held`, never moved under its holder.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..compiler.deploy_diff import COMPATIBLE, classify, stand_of
from ..compiler.ir import WorkflowIR
from ..errors import (
    E_INVALID_ARGUMENT,
    E_VERSION_HAS_OPEN_RUNS,
    E_VERSION_NOT_NEWER,
    E_WORKFLOW_NOT_FOUND,
    A44Error,
)
from ..runtime.open_runs import attempts_of, open_runs, target_ir
from ..runtime.run_moves import BUSY, HELD, MoveResult, move_run

FILTER_ROOTS = {"input", "run"}
RETRY_S = 0.2           # between passes over the runs that were busy or held


@dataclass
class MigrationReport:
    workflow_id: str
    to: int
    dry_run: bool
    results: list[MoveResult] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"workflow_id": self.workflow_id, "to": self.to, "dry_run": self.dry_run, "counts": self.counts(),
                "runs": [r.to_dict() for r in self.results]}


def rate_per_s(text: str | None) -> float | None:
    """`50/s`, `600/m`, `50` (a second): runs moved per second; None: as fast as the store allows."""
    if text is None or text == "":
        return None
    num, _, unit = str(text).partition("/")
    per = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}.get(unit.strip())
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    if per is None or value <= 0:
        raise A44Error(E_INVALID_ARGUMENT, f"--rate {text!r} is not a rate", hint="write e.g. 50/s or 600/m")
    return value / per


def _filter(text: str | None):
    if not text:
        return None
    from ..grammar import compile_expression

    res = compile_expression(text, roots=FILTER_ROOTS, expect_bool=True)
    if res.program is None:
        raise A44Error(E_INVALID_ARGUMENT, "the --filter expression is not valid: " +
                       "; ".join(f"{i.code} {i.message}" for i in res.issues if i.severity == "error"),
                       hint="CEL over `input` and `run` (run_id, version, state, created_at)")
    return res.program


async def migrate_runs(store, project: str, workflow_id: str, to: int, *, from_versions: list[int] | None = None,
                       filter: str | None = None, rate: str | None = None, dry_run: bool = False,
                       allow_reexecute: bool = False, by: str, why: str | None = None,
                       only_compatible: bool = False, passes: int = 5) -> MigrationReport:
    """Move the open runs of `workflow_id` on versions older than `to` (only `from_versions` if given, only those
    `filter` selects) to version `to`."""
    from ..runtime import evaluation

    target = await target_ir(store, project, workflow_id, to)
    program, per_s = _filter(filter), rate_per_s(rate)
    versions = [v["version"] for v in await store.fetch("versions_open_runs", project=project,
                                                        workflow_id=workflow_id, now=store.clock.now())]
    if from_versions:
        bad = [v for v in from_versions if v >= to]
        if bad:
            raise A44Error(E_VERSION_NOT_NEWER, f"--from {bad[0]} is not older than --to {to}",
                           hint="runs move to a newer version only")
        versions = [v for v in versions if v in from_versions]
    versions = [v for v in versions if v < to]
    report = MigrationReport(workflow_id, to, dry_run)
    pending: list[str] = []
    irs: dict[int, WorkflowIR] = {}
    async for row in open_runs(store, project, workflow_id, versions):
        if program is not None:
            run = {"run_id": row["run_id"], "version": row["version"], "state": row["state"],
                   "created_at": row["created_at"].isoformat()}
            try:
                ok = await evaluation.evaluate(program, {"input": row["input"], "run": run},
                                               evaluation.INGESTION_TIMEOUT_S) is True
            except Exception:  # noqa: BLE001 - a run the filter cannot read is not selected
                ok = False
            if not ok:
                continue
        if only_compatible and target.kind != "code":     # judged on the snapshot first: only a compatible run is locked and judged again
            old = irs.get(row["version"]) or irs.setdefault(
                row["version"], await target_ir(store, project, workflow_id, row["version"]))
            plan = classify(old, target, stand_of(row["run_id"], row["version"], row["state"], attempts_of(row)))
            if plan.outcome != COMPATIBLE:
                report.results.append(MoveResult(row["run_id"], plan.outcome, row["version"], plan))
                continue
        pending.append(row["run_id"])
    loop = asyncio.get_running_loop()
    started, done = loop.time(), 0
    for n in range(max(1, passes)):
        retry: list[str] = []
        for run_id in pending:
            if per_s is not None:
                ahead = started + done / per_s - loop.time()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            result = await move_run(store, project, run_id, target, irs, at=store.clock.now(), by=by, why=why,
                                    dry_run=dry_run, allow_reexecute=allow_reexecute,
                                    only_compatible=only_compatible)
            done += 1
            if result.outcome in (BUSY, HELD) and n + 1 < passes:
                retry.append(run_id)
            else:
                report.results.append(result)
        if not retry:
            break
        pending = retry
        await asyncio.sleep(RETRY_S)
    return report


async def versions(store, project: str, workflow_id: str) -> list[dict[str, Any]]:
    """Each published version with its open runs, oldest open run, and since when it is drained."""
    rows = await store.fetch("versions_open_runs", project=project, workflow_id=workflow_id, now=store.clock.now())
    if not rows:
        raise A44Error(E_WORKFLOW_NOT_FOUND, f"no version of {workflow_id} is published in {project}",
                       hint="`a44 automation publish FILE` first")
    out = []
    for r in rows:
        drained = r["last_finished_at"] if not r["open_runs"] and r["runs"] else None
        out.append({"version": r["version"], "sha256": r["sha256"], "published_at": r["published_at"].isoformat(),
                    "versioning": r["versioning"] or "pin", "open_runs": r["open_runs"], "runs": r["runs"],
                    "oldest_open_at": r["oldest_open_at"].isoformat() if r["oldest_open_at"] else None,
                    "drained_since": drained.isoformat() if drained else None})
    return out


async def retire(store, project: str, workflow_id: str, version: int, *, migrate_to: int | None = None,
                 by: str, why: str | None = None) -> dict[str, Any]:
    """Retire `version`: refused while it has open runs, unless `migrate_to` moves them all first. A retired
    version no run ever named is deleted; one finished runs name stays stored for their history (`kept`)."""
    listed = {v["version"]: v for v in await versions(store, project, workflow_id)}
    if version not in listed:
        raise A44Error(E_WORKFLOW_NOT_FOUND, f"{workflow_id} version {version} is not published in {project}")
    moved = None
    if listed[version]["open_runs"] and migrate_to is not None:
        moved = await migrate_runs(store, project, workflow_id, migrate_to, from_versions=[version], by=by,
                                   why=why or f"retiring v{version}")
        listed = {v["version"]: v for v in await versions(store, project, workflow_id)}
    left = listed[version]["open_runs"]
    if left:
        raise A44Error(E_VERSION_HAS_OPEN_RUNS, f"{workflow_id} v{version} has {left} open run(s)",
                       hint=f"a44 automation versions retire {workflow_id} {version} --migrate-to N, or wait until "
                            f"they finish", details={"open_runs": left,
                                                     "migration": moved.to_dict() if moved else None})
    deleted = await store.fetchval("version_retire", project=project, workflow_id=workflow_id, version=version,
                                   now=store.clock.now())
    return {"workflow_id": workflow_id, "version": version, "outcome": "deleted" if deleted else "kept",
            "migration": moved.to_dict() if moved else None}
