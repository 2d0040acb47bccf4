"""The deploy plan (§23, docs/deploys.md): `publish FILE --plan` compiles the files as publish does, stores
nothing, and for each workflow classifies every open run of every older version (compiler/deploy_diff.py) as
`compatible`, `mappable` (by the file's `migrate:` block) or `blocked`. The report has the counts, per version the
step diff, and per run its class, reasons and first differing step; `blocked` > 0 is exit 3 (a CI gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..compiler.deploy_diff import BLOCKED, COMPATIBLE, MAPPABLE, RunPlan, classify, stand_of, version_diff
from ..compiler.ir import WorkflowIR
from ..runtime.open_runs import attempts_of, open_runs, stored_irs


@dataclass
class WorkflowPlan:
    workflow_id: str
    version: int
    versioning: str
    versions: list[dict[str, Any]] = field(default_factory=list)    # per older version with open runs: its diff
    runs: list[RunPlan] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {c: sum(1 for r in self.runs if r.outcome == c) for c in (COMPATIBLE, MAPPABLE, BLOCKED)}

    def to_dict(self) -> dict[str, Any]:
        return {"workflow_id": self.workflow_id, "version": self.version, "versioning": self.versioning,
                "counts": self.counts(), "versions": self.versions, "runs": [r.to_dict() for r in self.runs]}


@dataclass
class PlanReport:
    project: str
    files: list[str]
    diagnostics: list = field(default_factory=list)
    workflows: list[WorkflowPlan] = field(default_factory=list)

    @property
    def errors(self) -> int:
        from ..diagnostics import Severity
        return sum(1 for d in self.diagnostics if d.severity is Severity.ERROR)

    def counts(self) -> dict[str, int]:
        out = {COMPATIBLE: 0, MAPPABLE: 0, BLOCKED: 0}
        for w in self.workflows:
            for k, n in w.counts().items():
                out[k] += n
        return out

    @property
    def blocked(self) -> bool:
        return self.counts()[BLOCKED] > 0

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "ok": self.errors == 0 and not self.blocked, "stored": False,
                "counts": self.counts(), "workflows": [w.to_dict() for w in self.workflows],
                "diagnostics": [d.to_dict() for d in self.diagnostics], "files": self.files}


async def plan_workflow(store, project: str, new: WorkflowIR) -> WorkflowPlan:
    """Classify every open run of the versions of `new.workflow_id` older than `new`."""
    plan = WorkflowPlan(new.workflow_id, new.version, new.versioning or "pin")
    irs, counts = await stored_irs(store, project, new.workflow_id)
    older = sorted(v for v in irs if v < new.version)
    for v in older:
        diff = version_diff(irs[v], new)
        diff["open_runs"] = counts[v]
        if new.migrate is not None and v in new.migrate.from_versions:
            old_ids = {n.id for n in irs[v].nodes}
            diff["migrate_unknown_steps"] = sorted(s for s in (*new.migrate.rename, *new.migrate.removed)
                                                   if s not in old_ids)
        plan.versions.append(diff)
    if older:
        async for row in open_runs(store, project, new.workflow_id, older):
            stand = stand_of(row["run_id"], row["version"], row["state"], attempts_of(row))
            if new.kind == "code":      # the replay gate decides: its history against the new code
                from ..runtime.code_moves import classify_code

                run = row | {"workflow_id": new.workflow_id}   # the page has what the replay gate reads
                plan.runs.append(await classify_code(store, store, run, new, stand))
            else:
                plan.runs.append(classify(irs[row["version"]], new, stand))
    return plan


async def plan_publish(store, project: str, paths: list[str], *, plugins: frozenset = frozenset()) -> PlanReport:
    """`publish --plan`: compile `paths` as publish does and plan each workflow; nothing is stored."""
    import asyncio
    import dataclasses

    from .publishing import compile_for_publish, published_known

    code = [str(p) for p in paths if str(p).endswith(".py")]
    rest = [p for p in paths if str(p) not in code]
    report = PlanReport(project=project, files=[])
    irs: list[WorkflowIR] = []
    if rest:
        known = dataclasses.replace(await published_known(store, project), plugins=frozenset(plugins))
        result = await asyncio.to_thread(compile_for_publish, rest, known)
        report.files.extend(result.files)
        report.diagnostics.extend(result.diagnostics)
        irs.extend(ir for _, ir in sorted(result.irs.items()) if isinstance(ir, WorkflowIR))
    if code:        # workflows in code (§12): their open runs are the replay gate's; the plan says so
        from ..sdk.lint import lint_code
        from ..sdk.loader import code_ir, import_path, workflows_of

        report.files.extend(code)
        report.diagnostics.extend(lint_code(code))
        if not report.errors:
            irs.extend(code_ir(wf, path, attr) for path in code
                       for attr, wf in sorted(workflows_of(import_path(path)).items()))
    if report.errors:
        return report
    for ir in irs:
        report.workflows.append(await plan_workflow(store, project, ir))
    return report
