from anthares44.automation import step, workflow


@workflow("tenant-onboard", version=1)
async def onboard(ctx, input):
    await step.run("create-tenant", fn=lambda: 1, timeout="10 seconds")
    await step.sleep("cooldown", "30x")
