"""Publishing (§3.8): compile files in publish mode, refuse on any error, store each workflow's IR as its version.

The compiler decides what is valid (every diagnostic, not just the first); the store decides what may be stored
(identical = `unchanged`, same version with other steps = `E_VERSION_CONFLICT`, lower version =
`E_VERSION_REGRESSION`). Runs in flight are untouched: they pinned their version when created.

Workflows are stored one by one, each in its own transaction: a refused workflow does not block the others of
the same call, and publishing again after a fix reports the already-stored ones as `unchanged`.

References (queues, declared connectors `con_...`, workflows a trigger names) are settled against the files of
the call and, beside them, against what the project has already published (runtime/published.py): a workflow
may be published alone after its queue or connector file. Connector files are stored like queue files.

Triggers (§8.3) are stored after the workflows, in `automation.triggers` (runtime/ingestion/triggers.py): the
standalone ones of trigger files and the inline ones of every workflow that was stored (created or unchanged); a
trigger of a refused workflow is not stored. A webhook trigger gets its secret here (shown once by
`a44 automation webhook secret T`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..compiler.ir import TriggerIR, WorkflowIR, to_json
from ..errors import E_VERSION_CONFLICT, E_VERSION_REGRESSION, A44Error
from ..sdk.loader import code_ir, import_path, workflows_of

CREATED, UNCHANGED, REFUSED = "created", "unchanged", "refused"
_REFUSALS = {E_VERSION_CONFLICT, E_VERSION_REGRESSION}


@dataclass(frozen=True)
class PublishedWorkflow:
    workflow_id: str
    version: int
    sha256: str
    file: str | None
    outcome: str                      # created | unchanged | refused
    error: A44Error | None = None     # why it was refused

    def to_dict(self) -> dict:
        return {"workflow_id": self.workflow_id, "version": self.version, "sha256": self.sha256, "file": self.file,
                "outcome": self.outcome, "error": self.error.to_dict() if self.error else None}


@dataclass
class PublishReport:
    project: str
    files: list[str]
    diagnostics: list = field(default_factory=list)          # every Diagnostic, errors and warnings
    workflows: list[PublishedWorkflow] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)        # standalone trigger ids compiled
    queues: list = field(default_factory=list)               # [(queue_id, created|updated|unchanged)]
    connectors: list = field(default_factory=list)           # [(connector_id, created|updated|unchanged)]
    stored_triggers: list = field(default_factory=list)      # StoredTrigger (standalone and inline), once stored
    channels: list = field(default_factory=list)             # [(channel name, created|updated|unchanged)]
    alerts: list = field(default_factory=list)               # [(alert rule name, created|updated|unchanged)]
    approvers: list = field(default_factory=list)            # [(approver group name, created|updated|unchanged)]
    upgraded: list = field(default_factory=list)             # `versioning: auto-upgrade`: {workflow_id, to, counts}

    @property
    def errors(self) -> int:
        from ..diagnostics import Severity
        return sum(1 for d in self.diagnostics if d.severity is Severity.ERROR)

    @property
    def ok(self) -> bool:
        """Nothing was refused: no compile error and no workflow refused by the store."""
        return self.errors == 0 and all(w.outcome != REFUSED for w in self.workflows)

    def to_dict(self) -> dict:
        return {"project": self.project, "ok": self.ok, "workflows": [w.to_dict() for w in self.workflows],
                "triggers": self.triggers, "queues": [{"queue_id": q, "outcome": o} for q, o in self.queues],
                "connectors": [{"connector_id": c, "outcome": o} for c, o in self.connectors],
                "stored_triggers": [t.to_dict() for t in self.stored_triggers],
                "channels": [{"name": n, "outcome": o} for n, o in self.channels],
                "alerts": [{"name": n, "outcome": o} for n, o in self.alerts],
                "approvers": [{"name": n, "outcome": o} for n, o in self.approvers],
                "upgraded": self.upgraded,
                "diagnostics": [d.to_dict() for d in self.diagnostics],
                "files": self.files}


def compile_for_publish(paths: list[str], known=None):
    """The compiler's result in publish mode (unresolved references are errors there); `known`: what the
    project has published (`published_known`)."""
    from ..compiler.lint import lint_paths

    return lint_paths(list(paths), mode="publish", lower=True, known=known)


async def published_known(store, project: str):
    """What `project` has published, as the compiler's `Known` (a stored connector that no longer validates is
    left out: the reference to it is then reported as unsettled)."""
    from ..compiler.models import ConnectorDecl
    from ..compiler.project import Known
    from ..runtime.approvals.groups import published_groups
    from ..runtime.published import published_objects

    queues, workflows, definitions = await published_objects(store, project)
    groups = {name: len(set(members)) for name, members in (await published_groups(store, project)).items()}
    connectors = {}
    for cid, definition in definitions.items():
        try:
            connectors[cid] = ConnectorDecl.model_validate(definition)
        except ValueError:
            continue
    versions = {r["workflow_id"]: r["version"] for r in await store.fetch("published_workflow_versions",
                                                                           project=project)}
    return Known(f"published in project {project}", frozenset(workflows), frozenset(queues), connectors,
                 versions=versions, approver_groups=groups)


async def publish(store, project: str, paths: list[str], *, plugins: frozenset = frozenset()) -> PublishReport:
    """Compile `paths`; when there is no error diagnostic, store every workflow. Never raises for a user's mistake
    (those are in the report); database failures raise A44Error. `plugins`: plugin names to take as installed (the
    test kit's mocks)."""
    import asyncio
    import dataclasses

    code = [p for p in paths if str(p).endswith(".py")]
    if code:    # workflows in code (§12), stored beside the YAML ones
        rest = [p for p in paths if p not in code]
        report = await publish(store, project, rest, plugins=plugins) if rest else \
            PublishReport(project=project, files=[])
        return report if report.errors else await publish_code(store, project, code, report)
    # compiling is CPU work: off the event loop, so a server publishing for one client keeps serving others
    known = dataclasses.replace(await published_known(store, project), plugins=frozenset(plugins))
    result = await asyncio.to_thread(compile_for_publish, paths, known)
    report = PublishReport(project=project, files=list(result.files), diagnostics=list(result.diagnostics))
    if report.errors:
        return report  # refuse everything: a half-valid project is not published
    monitoring = None
    if result.project is not None and (result.project.alerts or result.project.channels):
        monitoring = _monitoring(result.project)     # checked against the store before anything is written
        await monitoring.check(store, project)
    if result.project is not None and result.project.queues:    # queue files (§10.1), before their workflows
        from ..runtime.queues import store_queues

        report.queues = await store_queues(store, project, [d.model for d in result.project.queues.values()])
    if result.project is not None and result.project.approver_groups:  # approver groups, before their workflows
        from ..runtime.approvals.groups import store_groups

        report.approvers = await store_groups(store, project, [(name, list(d.model.members)) for name, d in
                                                               sorted(result.project.approver_groups.items())])
    if result.project is not None and result.project.connectors:    # connector files, before their workflows
        from ..runtime.published import store_connectors

        report.connectors = await store_connectors(store, project, [(d.model, d.data) for d in
                                                                    result.project.connectors.values()])
    standalone: list[TriggerIR] = []
    for key in sorted(result.irs):
        ir: Any = result.irs[key]
        if isinstance(ir, TriggerIR):
            report.triggers.append(key)
            standalone.append(ir)
            continue
        if not isinstance(ir, WorkflowIR):  # pragma: no cover - lowering only makes these two
            continue
        await _store_version(store, project, ir, (ir.source or {}).get("file"), report)
    await _auto_upgrade(store, project, result.irs, report)
    refused = {w.workflow_id for w in report.workflows if w.outcome == REFUSED}
    to_store = [(to_json(t), "standalone") for t in standalone if t.workflow_id not in refused]
    for key in sorted(result.irs):
        ir = result.irs[key]
        if isinstance(ir, WorkflowIR) and ir.workflow_id not in refused:
            to_store.extend((to_json(t), "inline") for t in ir.triggers)
    if to_store:
        from ..runtime.ingestion.triggers import store_triggers

        report.stored_triggers = await store_triggers(store, project, to_store)
    if monitoring is not None:
        report.channels, report.alerts = await monitoring.store(store, project)
    return report


async def _auto_upgrade(store, project: str, irs: dict, report: PublishReport) -> None:
    """A workflow just created with `versioning: auto-upgrade` (§23): its open runs of older versions that the plan
    marks compatible move to it now, each audited like `runs migrate` (app/run_migration.py)."""
    created = {w.workflow_id for w in report.workflows if w.outcome == CREATED}
    for ir in irs.values():
        if isinstance(ir, WorkflowIR) and ir.versioning == "auto-upgrade" and ir.workflow_id in created:
            from .run_migration import migrate_runs

            moved = await migrate_runs(store, project, ir.workflow_id, ir.version, by="publish",
                                       why="versioning: auto-upgrade", only_compatible=True)
            report.upgraded.append({"workflow_id": ir.workflow_id, "to": ir.version, "counts": moved.counts()})


def _monitoring(project):
    """The alert rule and channel files as the store's values (docs/alerts.md "Files")."""
    from ..compiler.models.monitoring import channel_config
    from ..compiler.models.types import format_duration
    from ..grammar.alert_rules import check_rule
    from ..runtime.alerts.rules import Published

    channels = [(d.model.id, d.model.type, channel_config(d.model)) for _, d in sorted(project.channels.items())]
    rules = [check_rule(name=m.name, metric=m.metric, filter=m.filter, condition=m.condition, severity=m.severity,
                        notify=m.notify, escalate_to=m.escalateTo, update_every=m.updateEvery,
                        suppress_window=format_duration(m.suppressWindow) if m.suppressWindow else None)
             for m in (d.model for _, d in sorted(project.alerts.items()))]
    return Published(channels, rules)


async def publish_code(store, project: str, paths: list[str], report: PublishReport) -> PublishReport:
    """Store every `@workflow` of the Python modules `paths` as an IR of kind `code` (module path, attribute name,
    source hash), by the rules of the YAML ones; refused, like YAML, when `lint` finds an error (sdk/lint.py)."""
    from ..sdk.lint import lint_code

    report.files.extend(str(p) for p in paths)
    report.diagnostics.extend(lint_code([str(p) for p in paths]))
    if report.errors:
        return report
    for path in paths:
        found = workflows_of(import_path(path))
        for attr, wf in sorted(found.items()):
            await _store_version(store, project, code_ir(wf, path, attr), str(path), report)
    return report


async def _store_version(store, project: str, ir, file: str | None, report: PublishReport) -> None:
    """Store one workflow's IR as its version; a refusal (§3.8) is recorded in the report, other errors raise."""
    try:
        outcome = await store.publish_version(project, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
        report.workflows.append(PublishedWorkflow(ir.workflow_id, ir.version, ir.sha256, file, outcome))
    except A44Error as exc:
        if exc.code not in _REFUSALS:
            raise
        report.workflows.append(PublishedWorkflow(ir.workflow_id, ir.version, ir.sha256, file, REFUSED, exc))
