"""Importing the module raises (publish imports it the same way): reported at the line that raised."""

from anthares44.automation import step, workflow

SETTINGS = {"region": "eu"}


@workflow("tenant-onboard", version=1)
async def onboard(ctx, input):
    return await step.run("create-tenant", fn=lambda: 1, timeout="10s")


REGION = SETTINGS["zone"]
