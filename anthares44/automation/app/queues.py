"""Queues and the dead-letter queue as a Python API (the CLI's `queues` and `dlq` verbs call these):

    async with await Automation.connect(project="pj_checkout_prod") as auto:
        q = Queues(auto)
        await q.stats()                                             # per queue: in flight, waiting, oldest age, DLQ depth
        await q.dlq_list("q_invoice_settle", limit=20)              # dead letters newest first (of every queue: None)
        await q.dlq_stats("q_invoice_settle", since="24h")          # counts by error code, first/last seen
        await q.dlq_show("dlq_01J9YB2C", with_attempts=True)        # envelope, last error, every delivery's attempts
        await q.dlq_redrive("q_invoice_settle", filter="error_code == 'E_UPSTREAM_503'", rate="20/s", max=5000)

See docs/queues.md."""

from __future__ import annotations

from collections.abc import Callable

from ..runtime import queues as rq
from .contract.services import QueuesService


class Queues(QueuesService):
    def __init__(self, auto):
        self.auto = auto
        self.store = auto.store
        self.project = auto.project

    async def stats(self) -> list[dict]:
        return await rq.queue_stats(self.store, self.project)

    async def dlq_list(self, queue: str | None = None, *, limit: int = 50) -> list[dict]:
        return await rq.dlq_list(self.store, self.project, queue, limit)

    async def dlq_stats(self, queue: str, since=None) -> dict:
        return await rq.dlq_stats(self.store, self.project, queue, since)

    async def dlq_show(self, dead_letter_id: str, *, with_attempts: bool = False) -> dict:
        return await rq.dlq_show(self.store, self.project, dead_letter_id, with_attempts=with_attempts)

    async def dlq_redrive(self, queue: str, *, filter: str | None = None, rate=None, max: int | None = None,
                          dry_run: bool = False, progress: Callable[[int, int | None], None] | None = None):
        return await rq.dlq_redrive(self.store, self.project, queue, filter=filter, rate=rate, max=max,
                                    dry_run=dry_run, progress=progress)

    async def deliver_envelope(self, workflow: str, raw: bytes | str, *, trigger_id: str | None = None) -> dict:
        from .automation import workflow_ref

        return await rq.deliver_envelope(self.store, self.project, workflow_ref(workflow), raw, trigger_id=trigger_id)
