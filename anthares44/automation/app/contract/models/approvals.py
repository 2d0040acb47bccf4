"""Human approval (§20, docs/approvals.md): a decision on a run's approval step, and the list of what waits for
whom."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from .common import Body, Doc


class DecisionRequest(Body):
    decision: Literal["approve", "reject"] = Field(description="approve or reject")
    comment: str | None = Field(None, max_length=4000, pattern=r"^[^\x00]*$",
                                description="why (at most 4000 characters), kept in the audit")


class DecisionResult(Doc):
    run_id: str
    step: str
    person: str = Field(description="who decided: the calling token's name")
    decision: str | None
    outcome: Literal["recorded", "approved", "rejected", "duplicate"] = Field(
        description="recorded (counted, more approvals needed), approved / rejected (the request closed with it), "
                    "duplicate (this person decided before: their first decision)")
    approvals: int | None
    needed: int | None


class OpenApproval(Doc):
    run_id: str
    workflow_id: str
    step_id: str
    min_approvals: int
    approvals: int
    deciders: list[str]
    decided: list[str]
    initiator: str | None
    opened_at: datetime
    timeout_at: datetime
    overdue_at: datetime | None


class Approvals(Doc):
    approvals: list[OpenApproval]
