from anthares44.automation import step, workflow


@workflow("tenant-onboard", version=1)
async def onboard(ctx, input):
    await step.sleep("cooldown", "30s")
    await step.run("notify", fn=lambda: 1, timeout="5s")
    await step.sleep("cooldown", "1m")
