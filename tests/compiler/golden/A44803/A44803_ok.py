"""A code workflow that publish accepts: lint prints nothing."""

from anthares44.automation import step, workflow


@workflow("tenant-onboard", version=1)
async def onboard(ctx, input):
    tenant = await step.run("create-tenant", fn=lambda: {"id": 7}, timeout="10s")
    await step.sleep("cooldown", "30s")
    return {"tenant_id": tenant["id"]}
