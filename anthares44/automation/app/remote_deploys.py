"""The deploy verbs over a daemon's REST API (§23, docs/deploys.md), as RemoteAutomation's: `publish --plan`
(the files uploaded as `publish` uploads them; nothing is stored), `runs migrate`, `versions`, `versions retire`.
The answers are the local verbs' JSON documents."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .automation import workflow_ref
from .contract import endpoints as ep


@dataclass
class RemotePlan:
    """A plan answered by the daemon: its document (local file names), its diagnostics as the compiler's."""
    doc: dict[str, Any]
    files: list[str]
    diagnostics: list = field(default_factory=list)

    @property
    def errors(self) -> int:
        from ..diagnostics import Severity
        return sum(1 for d in self.diagnostics if d.severity is Severity.ERROR)

    def to_dict(self) -> dict[str, Any]:
        return self.doc


class RemoteDeploys:
    """Mixed into RemoteAutomation (its `_call`)."""
    project: str

    async def _call(self, call, *, body: Any = None, params: dict | None = None) -> tuple[int, Any]:
        raise NotImplementedError   # RemoteAutomation's

    async def publish_plan(self, paths: list[str]):
        from ..compiler.lint import discover
        from ..diagnostics import Diagnostic, Severity, sorted_diagnostics
        from .uploads import upload_texts

        files, _ = discover([str(p) for p in paths])
        texts, back = upload_texts(files)
        _, doc = await self._call(ep.PUBLISH_PLAN.call(), body={"files": texts})
        doc["files"] = [back.get(f, f) for f in doc["files"]]
        for d in doc["diagnostics"]:
            d["file"] = back.get(d.get("file"), d.get("file"))
        diagnostics = sorted_diagnostics([
            Diagnostic(d["code"], Severity(d["severity"]), d["message"], d["file"], d["line"], d["col"],
                       d["endLine"], d["endCol"], d.get("hint")) for d in doc["diagnostics"]])
        return RemotePlan(doc, [os.fspath(f) for f in doc["files"]], diagnostics)

    async def migrate_runs(self, workflow: str, to: int, *, from_versions: list[int] | None = None,
                           filter: str | None = None, rate: str | None = None, dry_run: bool = False,
                           allow_reexecute: bool = False, by: str, why: str | None = None) -> dict:
        # the daemon records the calling token's name as who moved them (`by` is local only)
        _, doc = await self._call(ep.RUNS_MIGRATE.at(workflow=workflow_ref(workflow)), body={
            "to": to, "from_versions": from_versions, "filter": filter, "rate": rate, "dry_run": dry_run,
            "allow_reexecute": allow_reexecute, "reason": why})
        return doc

    async def versions(self, workflow: str) -> dict:
        _, doc = await self._call(ep.VERSIONS.at(workflow=workflow_ref(workflow)))
        return doc

    async def retire_version(self, workflow: str, version: int, *, migrate_to: int | None = None, by: str,
                             why: str | None = None) -> dict:
        _, doc = await self._call(ep.VERSION_RETIRE.at(workflow=workflow_ref(workflow), version=version),
                                  body={"migrate_to": migrate_to, "reason": why})
        return doc
