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

from ..durations import parse_duration
from ..errors import E_INVALID_ARGUMENT, E_TRIGGER_NOT_FOUND, A44Error
from ..runtime.ingestion import tokens, triggers
from .contract.services import AdminService


class Admin(AdminService):
    def __init__(self, store, project: str):
        self.store, self.project = store, project

    async def tokens(self) -> list[dict]:
        return await tokens.list_tokens(self.store, self.project)

    async def create_token(self, name: str, scopes: list[str], expires: str | None, allow_cidrs: list[str]):
        """`expires`: an age (30d) or never/none."""
        try:
            ttl = None if expires in (None, "never", "none") else parse_duration(expires)
        except ValueError as exc:
            raise A44Error(E_INVALID_ARGUMENT, f"expires: {exc}") from None
        return await tokens.create_token(self.store, self.project, name, scopes, ttl, allow_cidrs)

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
    """The firings of the schedule triggers found under `paths` over [start, end): {triggers, diagnostics}; with
    compile errors no triggers (and `ok` false). Nothing is stored."""
    from ..compiler.lint import lint_paths
    from ..diagnostics import has_errors
    from ..runtime.scheduling.occurrences import ScheduleError
    from ..runtime.scheduling.preview import preview, schedule_triggers

    result = lint_paths(paths, lower=True)
    diagnostics = [d.to_dict() for d in result.diagnostics]
    if has_errors(result.diagnostics):
        return {"ok": False, "triggers": [], "diagnostics": diagnostics}
    found = [t for t in schedule_triggers(result.irs) if trigger is None or t.id == trigger]
    if not found:
        raise A44Error(E_TRIGGER_NOT_FOUND, f"no schedule trigger {trigger!r} in the files" if trigger
                       else "no schedule trigger in the files")
    try:
        previews = [preview(t, start, end) for t in found]
    except (ScheduleError, ValueError) as exc:
        raise A44Error(E_INVALID_ARGUMENT, str(exc)) from None
    return {"ok": True, "triggers": [p.to_dict() for p in previews], "diagnostics": diagnostics}
