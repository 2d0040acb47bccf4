"""The triggers registry (§8.3): what `publish` stores (standalone trigger files and workflows' inline triggers)
in `automation.triggers`, and the secrets of webhook triggers (§9).

A webhook secret is 32 random bytes written as `whsec_` + 64 hex digits; the HMAC key is that string exactly as
shown (its UTF-8 bytes). It is created when the trigger is published (or at first use), shown once by
`a44 automation webhook secret T`, and kept in the database because verifying an HMAC needs the key itself.
`rotate` adds a new secret and keeps every older one valid for 48 h more.
"""

from __future__ import annotations

import secrets as _secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ...errors import E_SECRET_ALREADY_SHOWN, E_TRIGGER_NOT_FOUND, A44Error
from ..store.results import encode_json
from .ids import new_id
from .webhook_cache import invalidate

ROTATION_GRACE = timedelta(hours=48)
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + _secrets.token_hex(32)


@dataclass(frozen=True)
class StoredTrigger:
    trigger_id: str
    type: str
    workflow_id: str
    origin: str                 # standalone | inline
    outcome: str                # created | updated | unchanged
    secret_created: bool = False

    def to_dict(self) -> dict:
        return {"trigger_id": self.trigger_id, "type": self.type, "workflow_id": self.workflow_id,
                "origin": self.origin, "outcome": self.outcome, "secret_created": self.secret_created}


async def store_triggers(store, project: str, triggers: list[tuple[dict, str]]) -> list[StoredTrigger]:
    """Store each (TriggerIR as JSON, origin) in one transaction; webhook triggers without a valid secret get one."""
    now = store.clock.now()
    out: list[StoredTrigger] = []
    async with store.transaction("store_triggers") as conn:
        for ir, origin in triggers:
            tid = ir["id"]
            before = await conn.fetchrow("trigger_get", project=project, trigger_id=tid)
            if before is not None and before["ir"] == _roundtrip(ir) and before["active"]:
                outcome = "unchanged"
            else:
                await conn.fetchrow("trigger_upsert", project=project, trigger_id=tid, type=ir["type"],
                                    workflow_id=ir["workflow_id"], event=ir.get("event"), ir=encode_json(ir),
                                    origin=origin, now=now)
                outcome = "created" if before is None else "updated"
            created_secret = False
            if ir["type"] == "webhook":
                valid = await conn.fetchval("webhook_secret_count", project=project, trigger_id=tid, now=now)
                if not valid:
                    await conn.execute("webhook_secret_insert", secret_id=new_id("whs", now), project=project,
                                       trigger_id=tid, secret=new_secret(), now=now, revealed_at=None)
                    created_secret = True
            out.append(StoredTrigger(tid, ir["type"], ir["workflow_id"], origin, outcome, created_secret))
    invalidate(project)   # this process's webhook cache (other processes re-check in `webhook_ingest`)
    return out


def _roundtrip(ir: dict) -> Any:
    import json

    return json.loads(encode_json(ir))


async def get_trigger(store, project: str, trigger_id: str, *, type: str | None = None) -> dict:
    row = await store.fetchrow("trigger_get", project=project, trigger_id=trigger_id)
    if row is None or (type is not None and row["type"] != type):
        what = f"{type} trigger" if type else "trigger"
        raise A44Error(E_TRIGGER_NOT_FOUND, f"no {what} {trigger_id} is published in {project}",
                       hint="`a44 automation publish` the trigger file (or the workflow with inline triggers)")
    return dict(row)


async def list_triggers(store, project: str, type: str | None = None) -> list[dict]:
    return [dict(r) for r in await store.fetch("triggers_list", project=project, type=type)]


async def current_secret(store, project: str, trigger_id: str) -> dict:
    """The newest valid secret (created now if the trigger has none: "first use")."""
    await get_trigger(store, project, trigger_id, type="webhook")
    now = store.clock.now()
    async with store.transaction("webhook_secret") as conn:
        row = await conn.fetchrow("webhook_secret_current", project=project, trigger_id=trigger_id, now=now)
        if row is None:
            await conn.execute("webhook_secret_insert", secret_id=new_id("whs", now), project=project,
                               trigger_id=trigger_id, secret=new_secret(), now=now, revealed_at=None)
            row = await conn.fetchrow("webhook_secret_current", project=project, trigger_id=trigger_id, now=now)
            invalidate(project, trigger_id)
    return dict(row)


async def reveal_secret(store, project: str, trigger_id: str) -> str:
    """The current secret, once: a second call raises E_SECRET_ALREADY_SHOWN (rotate to get a new one)."""
    row = await current_secret(store, project, trigger_id)
    shown = await store.fetchval("webhook_secret_reveal", secret_id=row["secret_id"], now=store.clock.now())
    if shown is None:
        raise A44Error(E_SECRET_ALREADY_SHOWN,
                       f"the secret of {trigger_id} was shown already (at {row['revealed_at']:%Y-%m-%dT%H:%M:%SZ}); "
                       "it is shown once",
                       hint=f"`a44 automation webhook rotate {trigger_id}` makes a new one (the old one stays "
                            "valid 48 h); `webhook sign`/`webhook send` use the secret without showing it")
    return shown


async def rotate_secret(store, project: str, trigger_id: str) -> dict:
    """Add a new secret (returned, and marked shown) and keep the older ones valid for 48 h more."""
    await get_trigger(store, project, trigger_id, type="webhook")
    now = store.clock.now()
    secret = new_secret()
    until = now + ROTATION_GRACE
    async with store.transaction("webhook_rotate") as conn:
        await conn.execute("webhook_secrets_expire", project=project, trigger_id=trigger_id, until=until)
        await conn.execute("webhook_secret_insert", secret_id=new_id("whs", now), project=project,
                           trigger_id=trigger_id, secret=secret, now=now, revealed_at=now)
    invalidate(project, trigger_id)
    return {"trigger_id": trigger_id, "secret": secret, "previous_valid_until": until}


async def list_secrets(store, project: str, trigger_id: str) -> list[dict]:
    await get_trigger(store, project, trigger_id, type="webhook")
    return [dict(r) for r in await store.fetch("webhook_secrets_list", project=project, trigger_id=trigger_id)]
