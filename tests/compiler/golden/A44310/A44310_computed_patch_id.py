from anthares44.automation import step, workflow

PATCH = "swap-" + "b-c"


@workflow("tenant-onboard", version=2)
async def onboard(ctx, input):
    if step.patched(PATCH):
        return await step.run("create-tenant-v2", fn=lambda: 2, timeout="10s")
    return await step.run("create-tenant", fn=lambda: 1, timeout="10s")
