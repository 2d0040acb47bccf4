"""`uses: queue/publish` (§14): publishes an event envelope onto the project's bus (§8.1), so a workflow (or a bot)
can trigger other workflows.

The envelope's idempotency key is derived from the step key, `{run_id}:{step_id}:publish` (the same for every
attempt of the step): a retried attempt, or a zombie worker finishing late, hits the bus's 24 h dedupe (§8.2) and
publishes nothing more; its result names the original event. Result:
`{"eventId", "created", "idempotencyKey", "type", "deliveries": [{trigger_id, outcome, run_id}]}`.

The bus is the engine's EventPublisher (`ctx.services[PUBLISHER]`, services.py): the event's type and data are
values handed to it, never SQL.
"""

from __future__ import annotations

from typing import Any

from ..compiler.models.params import QueuePublishParams
from ..errors import E_CONNECTOR_FAILED, A44Error
from .protocol import StepContext
from .services import PUBLISHER, EventPublisher


def publish_key(ctx: StepContext) -> str:
    return f"{ctx.idempotency_key}:publish"


class QueuePublishConnector:
    name = "queue/publish"
    params_model = QueuePublishParams

    @staticmethod
    def _publisher(ctx: StepContext) -> EventPublisher:
        publisher = ctx.services.get(PUBLISHER)
        if publisher is None:
            raise A44Error(E_CONNECTOR_FAILED, "queue/publish needs the event publisher (the engine passes it as "
                                               f"ctx.services[{PUBLISHER!r}])")
        return publisher

    async def invoke(self, params: Any, ctx: StepContext) -> dict[str, Any]:
        p = params if isinstance(params, QueuePublishParams) else QueuePublishParams.model_validate(params)
        key = publish_key(ctx)
        res = await self._publisher(ctx).publish(ctx.project_id, p.type, p.data, key, partition_key=p.partitionKey)
        return {"eventId": res.event_id, "created": res.created, "idempotencyKey": key, "type": p.type,
                "deliveries": res.deliveries}
