"""A patch id written as a literal: every visit of every run looks its marker up by the same string."""

from anthares44.automation import step, workflow


@workflow("tenant-onboard", version=2)
async def onboard(ctx, input):
    if step.patched("swap-b-c"):
        return await step.run("create-tenant-v2", fn=lambda: 2, timeout="10s")
    return await step.run("create-tenant", fn=lambda: 1, timeout="10s")
