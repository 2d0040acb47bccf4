"""The code-workflow SDK (§12, docs/code-workflows.md):

    from anthares44.automation import workflow, step

    @workflow("tenant-onboard", version=4)
    async def onboard(ctx, input):
        tenant = await step.run("create-tenant", timeout="10s", fn=lambda: ...)
        await step.sleep("cooldown", "30s")
        return {"tenant_id": tenant["id"], "at": ctx.now()}

`core.py` holds the decorator, `step`, `ctx` and the deterministic execution; `loader.py` imports modules and
builds the `code` IR (app/publishing.py stores it); `fixtures.py` replays a recorded history without a database.
"""

from ..attempts import Attempt
from ..errors import E_CODE_UNAVAILABLE, E_CODE_WORKFLOW
from .core import Context, Execution, History, NonDeterministic, StepFailed, Suspend, WorkflowDef, step, workflow
from .fixtures import replay_fixture

__all__ = ["workflow", "step", "WorkflowDef", "Context", "Execution", "History", "Attempt", "Suspend",
           "StepFailed", "NonDeterministic", "replay_fixture", "E_CODE_UNAVAILABLE", "E_CODE_WORKFLOW"]
