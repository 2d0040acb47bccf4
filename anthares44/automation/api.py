"""The Python API of a44 automation: the same verbs as the CLI, async, for one project.

    from anthares44.automation.api import Automation

    async with await Automation.connect() as auto:          # A44_DATABASE_URL or the embedded PostgreSQL
        report = await auto.publish(["examples/workflows"])  # PublishReport: created | unchanged | refused
        handle = await auto.run("wf_invoice_settle", {"invoiceId": "inv_8812"},
                                idempotency_key="manual-inv_8812-2026-07-19", wait=True, timeout="60s")
        page = await auto.runs(state="compensation_failed", since="48h")   # RunPage(total, runs)
        attempts = await auto.logs(handle.run_id)
        async for event in auto.follow(handle.run_id): ...

The CLI (`a44 automation publish|run|runs|logs`) is a thin layer over these functions; docs/cli.md shows both.
"""

from .app.automation import (
                             MANUAL_TRIGGER,
                             Automation,
                             InvalidArgument,
                             RunHandle,
                             RunPage,
                             require_idempotency_key,
                             resolve_project,
                             workflow_ref,
)
from .app.publishing import CREATED, REFUSED, UNCHANGED, PublishedWorkflow, PublishReport
from .durations import parse_duration
from .errors import E_INVALID_ARGUMENT
from .settings import DEFAULT_PROJECT

__all__ = ["Automation", "RunHandle", "RunPage", "PublishReport", "PublishedWorkflow", "InvalidArgument",
           "CREATED", "UNCHANGED", "REFUSED", "DEFAULT_PROJECT", "MANUAL_TRIGGER", "E_INVALID_ARGUMENT",
           "parse_duration", "require_idempotency_key", "resolve_project", "workflow_ref"]
