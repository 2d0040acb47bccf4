"""Deploys (§23, docs/deploys.md): the plan of `publish --plan`, `runs migrate`, `versions` and `versions retire`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import Body, Doc, Text


class PlanRequest(Body):
    files: dict[str, str] = Field(description="relative path -> YAML text", min_length=1)


class PlanReport(Doc):
    project: str
    ok: bool
    stored: bool
    counts: dict[str, int] = Field(description="compatible, mappable, blocked: open runs of older versions")
    workflows: list[dict[str, Any]] = Field(description="per workflow: counts, each older version's step diff, "
                                                        "and every open run's class, reasons, first difference")
    diagnostics: list[dict[str, Any]]
    files: list[str]


class MigrateRequest(Body):
    to: int = Field(gt=0, description="the published version to move runs to")
    from_versions: list[int] | None = Field(None, description="only runs of these versions")
    filter: Text | None = Field(None, description="CEL over `input` and `run` selecting runs")
    rate: Text | None = Field(None, description="at most this many runs moved a second: 50/s, 600/m")
    dry_run: bool = False
    allow_reexecute: bool = Field(False, description="move runs whose completed steps would run again")
    reason: Text | None = Field(None, description="why, recorded in each run's log")


class MigrationReport(Doc):
    workflow_id: str
    to: int
    dry_run: bool
    counts: dict[str, int]
    runs: list[dict[str, Any]]


class Versions(Doc):
    workflow_id: str
    versions: list[dict[str, Any]] = Field(description="version, open_runs, oldest_open_at, drained_since, ...")


class RetireRequest(Body):
    migrate_to: int | None = Field(None, gt=0, description="move the version's open runs to this version first")
    reason: Text | None = None


class RetireResult(Doc):
    workflow_id: str
    version: int
    outcome: str = Field(description="deleted (no run named it) or kept (finished runs name it)")
    migration: dict[str, Any] | None = None
