"""The project's administration: API tokens, webhook secrets, installed connectors, metrics, schedule previews."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Age, Body, Doc, Id, Text


class TokenRequest(Body):
    name: Id
    scopes: list[Literal["automation:read", "automation:write", "automation:admin", "automation:approve"]] = Field(min_length=1)
    expires: Age | None = Field("30d", description="an age (30d), or never")
    allow_cidrs: list[Text] = Field(default_factory=list, max_length=100)


class NewToken(Doc):
    token_id: str
    token: str = Field(description="shown once")
    project_id: str
    name: str
    scopes: list[str]
    allow_cidrs: list[str]
    expires_at: str | None


class Tokens(Doc):
    tokens: list[dict] = Field(description="never the token itself")


class Revoked(Doc):
    revoked: str


class WebhookSecret(Doc):
    trigger_id: str
    secret: str = Field(description="shown once")


class RotatedSecret(Doc):
    trigger_id: str
    secret: str
    previous_valid_until: str


class Connectors(Doc):
    connectors: list[dict] = Field(description="uses, source, value (where it comes from), params")


class Metrics(Doc):
    metrics: list[dict] = Field(description="name, labels, value: the samples of GET /metrics")


class SchedulePreviewRequest(Body):
    files: dict[str, str] = Field(min_length=1, description="relative path -> YAML text (trigger or workflow "
                                                              "files)")
    trigger: Id | None = Field(None, description="only this trigger")
    from_: Text = Field(alias="from", description="window start, inclusive (ISO instant)")
    to: Text = Field(description="window end, exclusive")


class SchedulePreview(Doc):
    triggers: list[dict]


class Principal(Doc):
    token_id: str
    name: str
    project_id: str
    scopes: list[str]
    expires_at: str | None
