"""The use cases of `a44 monitor channel ...` and `a44 monitor notifications ...` (docs/notifications.md):

    n = Notifications(auto, settings)
    await n.create_channel("squad-billing", "webhook", {"url": "https://hooks.example.com/a44", "secretRef": "sec_hook"})
    await n.channels(); await n.channel("squad-billing"); await n.remove_channel("squad-billing")
    await n.test_channel("squad-billing", timeout=30)   # queue a test message, send it, say what happened
    await n.notifications(state="failed"); await n.retry(42)

`settings` (settings.Settings, what the edge read) locates the secret file and the delivery settings."""

from __future__ import annotations

import asyncio
import secrets as token
import time

from ..errors import E_SECRET_NOT_FOUND, A44Error
from ..runtime.notify import channels as ch
from ..runtime.notify import outbox
from ..runtime.notify.delivery import Deliverer, DeliverySettings, retry_command
from ..runtime.secrets.file import SecretFile
from ..runtime.secrets.source import SecretSource, env_name
from ..settings import Settings
from ..suggestions import closest
from .contract.services import NotificationsService

WAIT_POLL_S = 0.2


class Notifications(NotificationsService):
    def __init__(self, auto, settings: Settings | None = None):
        self.store, self.project = auto.store, auto.project
        self.settings = settings if settings is not None else Settings()
        self._file = SecretFile.of(self.settings)
        self.secrets = SecretSource(file=self._file)

    def _check_secret(self, ref: str) -> None:
        try:
            self.secrets.get(ref)
        except A44Error as exc:
            if exc.code != E_SECRET_NOT_FOUND:
                raise
            near = closest(ref, self._file.names(), 0.6)
            raise A44Error(E_SECRET_NOT_FOUND, f"secret {ref} is not defined",
                           hint=(f"did you mean {near}? " if near else "") +
                           f"`a44 automation secrets set {ref}` (value on stdin) or set {env_name(ref)}") from None

    async def create_channel(self, name: str, kind: str, config: dict) -> dict:
        """A new channel; its config checked, and every secret it names defined, before anything is written."""
        checked = ch.check_config(ch.check_kind(kind), config)
        ch.check_name(name)
        for ref in ch.secret_refs(kind, checked):
            self._check_secret(ref)
        return await ch.create(self.store, self.project, name, kind, checked)

    async def channels(self) -> list[dict]:
        return await ch.listing(self.store, self.project)

    async def channel(self, name: str) -> dict:
        row = await ch.get(self.store, self.project, name)
        return {**row, "config": ch.public_config(row["kind"], row["config"])}

    async def remove_channel(self, name: str) -> None:
        await ch.remove(self.store, self.project, name)

    async def test_channel(self, name: str, *, timeout: float = 30.0) -> dict:
        """Queue a `test` notification to `name` and send it from here (a daemon may take it first: then wait
        for its outcome, `timeout` seconds at most). The notification's row, as it ended up."""
        await ch.get(self.store, self.project, name)
        key = f"test:{name}:{token.token_hex(8)}"
        nid = await outbox.enqueue(self.store, self.project, name, idempotency_key=key, kind="test", severity="p4",
                                   payload={"title": f"test of channel {name}",
                                            "next_command": "a44 monitor notifications --state failed"})
        deliverer = Deliverer(self.store, self.secrets, DeliverySettings.from_settings(self.settings))
        try:
            sent_here = await deliverer.deliver(nid)
        finally:
            await deliverer.close()
        deadline = time.monotonic() + timeout
        while True:
            row = await outbox.get(self.store, self.project, nid)
            settled = row["state"] != "pending" or (row["attempts"] > 0 and row["last_error"] is not None)
            if sent_here or settled or time.monotonic() >= deadline:
                return {**row, "retry_command": retry_command(nid)}
            await asyncio.sleep(WAIT_POLL_S)

    async def notifications(self, *, state: str | None = None, limit: int = 100) -> list[dict]:
        return await outbox.listing(self.store, self.project, state, limit)

    async def notification(self, notification_id: int) -> dict:
        return await outbox.get(self.store, self.project, notification_id)

    async def retry(self, notification_id: int) -> bool:
        return await outbox.requeue(self.store, self.project, notification_id)
