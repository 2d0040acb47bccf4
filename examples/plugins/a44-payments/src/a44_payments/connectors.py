"""The two connector objects a44 loads by entry point: `authorize` and `void` (see README for the protocol).

Their one effect each is an HTTP call to a payments API at `$A44_PAYMENTS_URL` (default http://127.0.0.1:8089,
where `python -m a44_payments.standin` listens):

  authorize  POST /v1/authorizations                     Idempotency-Key: {run_id}:{step_id}
  void       POST /v1/authorizations/{key-or-id}/void    Idempotency-Key: {run_id}:{step_id}:compensate

An authorization is keyed by the authorizing step's idempotency key, so a retried or re-granted attempt finds the
first one's authorization instead of placing a second hold. As a `compensate:` of that step, `void` needs no
parameters: the interpreter calls a compensation with the compensated step's `step_id` (and the key
`{run_id}:{step_id}:compensate`), from which it derives the authorization's key `{run_id}:{step_id}`.

aiohttp is imported on first call only, so that `a44 automation lint` (which loads the params models) stays free
of runtime dependencies.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_URL = "http://127.0.0.1:8089"
RETRY_ON = frozenset({408, 429, 500, 502, 503, 504})
COMPENSATE_SUFFIX = ":compensate"
E_PAYMENT_DECLINED = "E_PAYMENT_DECLINED"


def base_url() -> str:
    return (os.environ.get("A44_PAYMENTS_URL") or DEFAULT_URL).rstrip("/")


class AuthorizeParams(BaseModel):
    """`with:` of `connector/payments.authorize`; every field optional so the manual's step needs none."""

    model_config = ConfigDict(extra="forbid")
    amountCents: int | None = Field(default=None, ge=0, description="amount to hold, in cents")
    currency: str = Field(default="BRL", pattern=r"^[A-Z]{3}$", description="ISO 4217 code")
    reference: str | None = Field(default=None, max_length=200,
                                  description="what the hold is for, e.g. \"{{ input.invoiceId }}\"")


class VoidParams(BaseModel):
    """`with:` of `connector/payments.void`. As the `compensate:` of the authorizing step it needs none; as a
    step of its own it needs `authorizationId` (e.g. "{{ steps['reserve-funds'].output.authorizationId }}") or
    `authorizationKey` (the authorizing step's idempotency key)."""

    model_config = ConfigDict(extra="forbid")
    authorizationId: str | None = Field(default=None, pattern=r"^auth_[0-9a-f]{16}$")
    authorizationKey: str | None = Field(default=None, min_length=1, max_length=300)


def _error(code: str, message: str, **kw) -> Exception:
    try:
        from anthares44.automation.errors import A44Error
    except ImportError:  # pragma: no cover - the plugin is meant to be installed with a44
        return RuntimeError(f"{code}: {message}")
    return A44Error(code, message, **kw)


def _retry_after_ms(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return max(0, int(float(value) * 1000))
    except ValueError:
        return None


class _Client:
    """One aiohttp session per event loop (a connector object lives as long as the worker; tests run several
    loops), closed by `aclose()` (the registry calls it)."""

    def __init__(self) -> None:
        self._session = None
        self._loop = None

    async def session(self, ctx: Any):
        shared = (getattr(ctx, "services", None) or {}).get("http_session")
        if shared is not None:
            return shared
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(trust_env=False)
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed \
                and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None
        self._loop = None

    async def post(self, ctx: Any, path: str, body: dict, idempotency_key: str) -> tuple[int, dict]:
        """POST JSON; return (status, json) for 2xx, raise an A44Error otherwise (E_UPSTREAM_<status>,
        E_PAYMENT_DECLINED for 402, E_NETWORK, E_STEP_TIMEOUT)."""
        import aiohttp

        url = base_url() + path
        remaining = ctx.deadline - time.monotonic() if getattr(ctx, "deadline", None) else 15.0
        if remaining <= 0:
            raise _error("E_STEP_TIMEOUT", f"no time left for POST {url}")
        session = await self.session(ctx)
        headers = {"Idempotency-Key": idempotency_key, "Content-Type": "application/json"}
        try:
            async with asyncio.timeout(remaining):
                async with session.post(url, data=json.dumps(body), headers=headers,
                                        allow_redirects=False) as resp:
                    status = resp.status
                    text = await resp.text(errors="replace")
                    retry_after = resp.headers.get("Retry-After")
        except TimeoutError:
            raise _error("E_STEP_TIMEOUT", f"POST {url} did not answer within {remaining:.3f} s") from None
        except aiohttp.ClientError as exc:
            raise _error("E_NETWORK", f"POST {url} failed: {type(exc).__name__}: {exc}",
                         hint="is the payments API up? (python -m a44_payments.standin; A44_PAYMENTS_URL)") \
                from None
        try:
            doc = json.loads(text) if text else {}
        except ValueError:
            doc = {"text": text[:2000]}
        if 200 <= status < 300:
            return status, doc if isinstance(doc, dict) else {"value": doc}
        message = doc.get("message") if isinstance(doc, dict) else None
        if status == 402:
            raise _error(E_PAYMENT_DECLINED, f"payments API declined: {message or 'no reason given'}",
                         details={"retryable": False, "status": status, "body": doc})
        retryable = status in RETRY_ON
        details: dict[str, Any] = {"retryable": retryable, "status": status, "body": doc}
        after = _retry_after_ms(retry_after) if retryable else None
        if after is not None:
            details["retry_after_ms"] = after
        raise _error(f"E_UPSTREAM_{status}", f"payments API answered {status} to POST {path}"
                     + (f": {message}" if message else ""), details=details)


class AuthorizeConnector:
    name = "payments.authorize"
    params_model = AuthorizeParams

    def __init__(self) -> None:
        self.client = _Client()

    async def invoke(self, params: AuthorizeParams, ctx: Any) -> dict:
        body = {"amountCents": params.amountCents, "currency": params.currency, "reference": params.reference,
                "runId": ctx.run_id, "stepId": ctx.step_id}
        status, doc = await self.client.post(ctx, "/v1/authorizations", body, ctx.idempotency_key)
        return {"authorizationId": doc.get("authorizationId"), "status": doc.get("status"),
                "amountCents": doc.get("amountCents"), "currency": doc.get("currency"),
                "reference": doc.get("reference"), "replayed": status == 200}

    async def aclose(self) -> None:
        await self.client.aclose()


class VoidConnector:
    name = "payments.void"
    params_model = VoidParams

    def __init__(self) -> None:
        self.client = _Client()

    @staticmethod
    def target(params: VoidParams, ctx: Any) -> str:
        """What to void: `authorizationId`, else `authorizationKey`, else (as a compensation) the compensated
        step's key `{run_id}:{step_id}`."""
        if params.authorizationId:
            return params.authorizationId
        if params.authorizationKey:
            return params.authorizationKey
        key = ctx.idempotency_key
        if key.endswith(COMPENSATE_SUFFIX):
            return f"{ctx.run_id}:{ctx.step_id}"
        raise _error("E_PARAMS_INVALID", "payments.void used as a step needs `with: {authorizationId: ...}` or "
                                         "`authorizationKey`; only as a `compensate:` can it derive the "
                                         "authorization from the compensated step")

    async def invoke(self, params: VoidParams, ctx: Any) -> dict:
        ref = self.target(params, ctx)
        _, doc = await self.client.post(ctx, f"/v1/authorizations/{quote(ref, safe=':')}/void",
                                        {"runId": ctx.run_id, "stepId": ctx.step_id}, ctx.idempotency_key)
        return {"authorizationId": doc.get("authorizationId"), "status": doc.get("status"),
                "voided": [doc.get("authorizationId")] if doc.get("status") == "voided" else []}

    async def aclose(self) -> None:
        await self.client.aclose()


authorize = AuthorizeConnector()
void = VoidConnector()
