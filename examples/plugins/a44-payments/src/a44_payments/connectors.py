"""The two connector objects a44 loads by entry point: `authorize` and `void` (see README for the protocol)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .ledger import Ledger

E_PAYMENT_DECLINED = "E_PAYMENT_DECLINED"


class AuthorizeParams(BaseModel):
    """`with:` of `connector/payments.authorize`; every field optional so the manual's step needs none."""

    model_config = ConfigDict(extra="forbid")
    amountCents: int | None = Field(default=None, ge=0, description="amount to hold, in cents")
    currency: str = Field(default="BRL", pattern=r"^[A-Z]{3}$", description="ISO 4217 code")
    reference: str | None = Field(default=None, max_length=200, description="free text, e.g. the invoice id")


class VoidParams(BaseModel):
    """`with:` of `connector/payments.void`; without `authorizationId` every hold of the run is voided."""

    model_config = ConfigDict(extra="forbid")
    authorizationId: str | None = Field(default=None, pattern=r"^auth_[0-9a-f]{16}$")


def _declined(message: str) -> Exception:
    try:
        from anthares44.automation.errors import A44Error
    except ImportError:  # pragma: no cover - the plugin is meant to be installed with a44
        return RuntimeError(f"{E_PAYMENT_DECLINED}: {message}")
    return A44Error(E_PAYMENT_DECLINED, message, hint="lower the amount or raise A44_PAYMENTS_LIMIT_CENTS")


class AuthorizeConnector:
    name = "payments.authorize"
    params_model = AuthorizeParams

    def __init__(self, ledger: Ledger | None = None):
        self.ledger = ledger

    async def invoke(self, params: AuthorizeParams, ctx: Any) -> dict:
        limit = int(os.environ.get("A44_PAYMENTS_LIMIT_CENTS", "10000000"))
        if params.amountCents is not None and params.amountCents > limit:
            raise _declined(f"amount {params.amountCents} exceeds the limit of {limit} cents")
        ledger = self.ledger or Ledger()
        return await asyncio.to_thread(
            ledger.authorize, idempotency_key=ctx.idempotency_key, run_id=ctx.run_id, step_id=ctx.step_id,
            amount_cents=params.amountCents, currency=params.currency, reference=params.reference)


class VoidConnector:
    name = "payments.void"
    params_model = VoidParams

    def __init__(self, ledger: Ledger | None = None):
        self.ledger = ledger

    async def invoke(self, params: VoidParams, ctx: Any) -> dict:
        ledger = self.ledger or Ledger()
        ids = await asyncio.to_thread(ledger.void, run_id=ctx.run_id, authorization_id=params.authorizationId)
        return {"voided": ids}


authorize = AuthorizeConnector()
void = VoidConnector()
