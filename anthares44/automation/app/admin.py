"""The project's administration as a Python API, what `GET|POST /v1/automation/tokens`, `/webhooks/...`,
`/metrics` and `/schedules/preview` run (the CLI's `auth token`, `webhook secret|rotate`, `metrics` and
`schedule preview` do the same on the database):

    admin = Admin(store, "pj_checkout_prod")
    await admin.create_token("ci", ["automation:write"], "30d", [])   # NewToken (shown once)
    await admin.rotate_webhook_secret("trg_stripe")                   # {trigger_id, secret, previous_valid_until}
    await admin.metrics("automation_queue")                           # the project's samples of GET /metrics
    schedule_preview(["triggers/"], None, "2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z")
"""

from __future__ import annotations

from datetime import timedelta

from ..durations import parse_duration
from ..errors import E_INVALID_ARGUMENT, A44Error
from ..runtime.ingestion import tokens, triggers
from .contract.services import AdminService

NEVER = ("never", "none")
_TTL_HINT = "give an age (30d, 12h), or `never` for a token that does not expire"


def token_ttl(expires: str | timedelta | None) -> timedelta | None:
    """How long a new token lives: an age (30d, 12h), or None for never/none: the one rule of `auth token create`
    on the database, through the REST API and from the Python API. Zero (`0`, `0s`) is refused, not read as
    never: a token that never expires is a choice to spell out, and one that expires at once is no token."""
    if expires is None or expires in NEVER:
        return None
    try:
        ttl = None if str(expires).strip() == "0" else parse_duration(expires)
    except ValueError as exc:
        raise A44Error(E_INVALID_ARGUMENT, f"expires: {exc}", hint=_TTL_HINT) from None
    if ttl is None or ttl <= timedelta(0):
        raise A44Error(E_INVALID_ARGUMENT, f"expires: {str(expires)[:40]!r} is no time: the token would be expired "
                                           "when made", hint=_TTL_HINT)
    return ttl


class Admin(AdminService):
    def __init__(self, store, project: str):
        self.store, self.project = store, project

    async def tokens(self) -> list[dict]:
        return await tokens.list_tokens(self.store, self.project)

    async def create_token(self, name: str, scopes: list[str], expires: str | None, allow_cidrs: list[str]):
        """`expires`: an age (30d) or never/none (token_ttl)."""
        return await tokens.create_token(self.store, self.project, name, scopes, token_ttl(expires), allow_cidrs)

    async def revoke_token(self, token_id: str) -> None:
        await tokens.revoke_token(self.store, self.project, token_id)

    async def webhook_secret(self, trigger: str) -> str:
        return await triggers.reveal_secret(self.store, self.project, trigger)

    async def rotate_webhook_secret(self, trigger: str) -> dict:
        return await triggers.rotate_secret(self.store, self.project, trigger)

    async def metrics(self, prefix: str | None = None) -> list[dict]:
        """The samples of GET /metrics whose name starts with `prefix`, of this project and of no project:
        another project's queue and workflow names are not its to read."""
        from .metrics import as_rows, collect

        return [r for r in as_rows(await collect(self.store)) if (not prefix or r["name"].startswith(prefix))
                and r["labels"].get("project", self.project) == self.project]


def schedule_preview(paths: list[str], trigger: str | None, start: str, end: str) -> dict:
    """The firings of the schedule triggers found under `paths` over [start, end): {ok, triggers, diagnostics}
    (app/schedules.py, as `schedule preview` computes them); with compile errors no triggers. Nothing is stored."""
    from .schedules import preview_schedules

    return preview_schedules(paths, trigger, start, end).to_dict()
