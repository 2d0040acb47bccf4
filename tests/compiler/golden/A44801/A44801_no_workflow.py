"""Helpers only: publish refuses a module without a @workflow."""


async def onboard(ctx, input):
    return {"ok": True}
