"""`a44 automation publish module.py`: store every `@workflow` of a Python module as an IR of kind `code`
(module path, attribute name, source hash). Same rules as YAML (§3.8): identical = unchanged, the same version
with another source = E_VERSION_CONFLICT, a lower version = E_VERSION_REGRESSION."""

from __future__ import annotations

from ..errors import E_INVALID_ARGUMENT, A44Error


async def publish_code(store, project: str, paths: list[str], report):
    from ..app.publishing import _REFUSALS, REFUSED, PublishedWorkflow
    from ..compiler.ir import to_json
    from .loader import code_ir, import_path, workflows_of

    for path in paths:
        report.files.append(str(path))
        mod = import_path(path)
        found = workflows_of(mod)
        if not found:
            raise A44Error(E_INVALID_ARGUMENT, f"{path} declares no @workflow",
                           hint="from anthares44.automation import workflow, step")
        for attr, wf in sorted(found.items()):
            ir = code_ir(wf, path, attr)
            try:
                outcome = await store.publish_version(project, ir.workflow_id, ir.version, ir.sha256, to_json(ir))
                report.workflows.append(PublishedWorkflow(ir.workflow_id, ir.version, ir.sha256, str(path), outcome))
            except A44Error as exc:
                if exc.code not in _REFUSALS:
                    raise
                report.workflows.append(PublishedWorkflow(ir.workflow_id, ir.version, ir.sha256, str(path),
                                                          REFUSED, exc))
    return report
