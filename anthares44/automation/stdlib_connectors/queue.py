"""`uses: queue/publish` (§14): publishes an event envelope onto the project's bus (§8.1, the ingestion plane's
`runtime/ingestion/bus.publish_event`), so a workflow (or a bot) can trigger other workflows.

The envelope's idempotency key is derived from the step key, `{run_id}:{step_id}:publish` (the same for every
attempt of the step): a retried attempt, or a zombie worker finishing late, hits the bus's 24 h dedupe (§8.2) and
publishes nothing more; its result names the original event. Result:
`{"eventId", "created", "idempotencyKey", "type", "deliveries": [{trigger_id, outcome, run_id}]}`.

The bus needs the control store, which the engine passes as `ctx.services["store"]` (the bus's own named
queries run on it; the event's type and data are values, never SQL).
"""

from __future__ import annotations

from typing import Any

from ..compiler.models.params import QueuePublishParams
from ..errors import E_CONNECTOR_FAILED, A44Error
from .protocol import StepContext


def publish_key(ctx: StepContext) -> str:
    return f"{ctx.idempotency_key}:publish"


class QueuePublishConnector:
    name = "queue/publish"
    params_model = QueuePublishParams

    def _store(self, ctx: StepContext):
        store = ctx.services.get("store")
        if store is None:
            raise A44Error(E_CONNECTOR_FAILED, "queue/publish needs the control store (the engine passes it as "
                                               "ctx.services['store'])")
        return store

    async def invoke(self, params: Any, ctx: StepContext) -> dict[str, Any]:
        p = params if isinstance(params, QueuePublishParams) else QueuePublishParams.model_validate(params)
        from ..runtime.ingestion.bus import publish_event

        key = publish_key(ctx)
        res = await publish_event(self._store(ctx), ctx.project_id, p.type, p.data, key,
                                  partition_key=p.partitionKey)
        return {"eventId": res.event_id, "created": res.created, "idempotencyKey": key, "type": p.type,
                "deliveries": res.deliveries}
