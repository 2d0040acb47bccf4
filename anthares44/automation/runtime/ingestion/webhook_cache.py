"""A short-lived cache of what the webhook endpoint needs to verify a request: the trigger, its valid secrets (with
their expiry) and its workflow's latest version (docs/webhooks.md, "Performance").

Why it stays exact although entries live up to `TTL_S` seconds:
* a secret added since the entry was read (rotation, first use) -- a signature that matches no cached secret is
  checked again against a fresh read before the request is refused (`accept_webhook`), so a new secret works at
  once, in every process;
* a secret that expires -- each secret's `expires_at` is cached with it and compared with the clock per request;
* a republished trigger (other workflow, deactivated) or a newly published workflow version -- `webhook_ingest`
  re-checks the trigger's `updated_at` stamp and the latest version in the same statement that writes, writes
  nothing when they changed, and the request is redone from a fresh read;
* an unknown trigger is never cached (404 is always read from the database).
In this process, `store_triggers`, `rotate_secret` and `current_secret` also drop the entry at once (`invalidate`).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Any

TTL_S = 2.0      # the default; a process sets its own with tune() (A44_WEBHOOK_CACHE_TTL, settings.py)


@dataclass(frozen=True)
class WebhookTarget:
    trigger_id: str
    workflow_id: str
    updated_at: datetime
    secrets: tuple[tuple[str, datetime | None], ...]    # (secret, expires_at), newest first
    version: int | None
    workflow_ir: Any
    fetched_at: float                                   # time.monotonic() of the read (wall: freshness vs publishes)

    def valid_secrets(self, now: datetime) -> list[str]:
        return [s for s, exp in self.secrets if exp is None or exp > now]

    def __getitem__(self, name: str) -> Any:     # the record-like access older callers use
        return getattr(self, name)


class TargetCache:
    def __init__(self, ttl: float = TTL_S):
        self.ttl = ttl
        self._entries: dict[tuple[str, str], WebhookTarget] = {}

    def get(self, project: str, trigger_id: str) -> WebhookTarget | None:
        entry = self._entries.get((project, trigger_id))
        if entry is None or time.monotonic() - entry.fetched_at > self.ttl:
            return None
        return entry

    def put(self, project: str, entry: WebhookTarget) -> None:
        if len(self._entries) > 10000:
            self._entries.clear()
        self._entries[(project, entry.trigger_id)] = entry

    def drop(self, project: str, trigger_id: str | None = None) -> None:
        if trigger_id is None:
            for key in [k for k in self._entries if k[0] == project]:
                self._entries.pop(key, None)
        else:
            self._entries.pop((project, trigger_id), None)


_caches: weakref.WeakKeyDictionary[Any, TargetCache] = weakref.WeakKeyDictionary()


def tune(store, ttl: float | None) -> None:
    """How long the store's cache keeps an entry from now on (None: the default)."""
    _caches[store] = TargetCache(TTL_S if ttl is None else ttl)


def cache_for(store) -> TargetCache:
    cache = _caches.get(store)
    if cache is None:
        cache = _caches[store] = TargetCache()
    return cache


def invalidate(project: str, trigger_id: str | None = None) -> None:
    """Drop the cached entries of a trigger (every trigger of the project when None), for every store here."""
    for cache in list(_caches.values()):
        cache.drop(project, trigger_id)


def from_row(row) -> WebhookTarget:
    expiries = list(row["secret_expiries"] or [])
    secrets = list(row["secrets"] or [])
    return WebhookTarget(row["trigger_id"], row["workflow_id"], row["updated_at"],
                         tuple(zip(secrets, expiries + [None] * (len(secrets) - len(expiries)))),
                         row["version"], row["workflow_ir"], time.monotonic())
