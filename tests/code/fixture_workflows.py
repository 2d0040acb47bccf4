"""The workflows the checked-in replay fixtures (fixtures/*.json) are replayed against. Replaying never runs a
step body, so `api` is never called here."""

from anthares44.automation import step, workflow

api = None


@workflow("tenant-onboard", version=4)
async def onboard(ctx, input):
    tenant = await step.run(
        "create-tenant", timeout="10s",
        fn=lambda: api.tenants.create(name=input["name"], request_id=ctx.idempotency_key),
    )
    await step.run(
        "provision-db", timeout="120s",
        retry={"max": 4, "strategy": "exponential-jitter"},
        compensate=lambda: api.databases.drop(tenant["db_id"]),
        fn=lambda: api.databases.create(tenant_id=tenant["id"]),
    )
    await step.sleep("cooldown", "30s")
    return {"tenant_id": tenant["id"], "at": ctx.now()}


@workflow("tenant-onboard", version=5)
async def onboard_reordered(ctx, input):
    """An edit that moves provision-db first: histories recorded by v4 must not replay against it."""
    db = await step.run("provision-db", timeout="120s", fn=lambda: api.databases.create(tenant_id=None))
    tenant = await step.run("create-tenant", timeout="10s", fn=lambda: api.tenants.create(name=input["name"]))
    await step.sleep("cooldown", "30s")
    return {"tenant_id": tenant["id"], "db": db, "at": ctx.now()}
