"""`uses: bot/invoke` (§15): one call to an OpenAI-compatible chat-completions endpoint whose validated answer is the
step result. The interpreter records it like any result, so a replay reads it from the log and never asks the
model again.

Where the endpoint is:
  * the step's `secretRef`, or the declared connector's `auth.secretRef`, names a secret holding either JSON
    `{"baseUrl": "https://.../v1", "apiKey": "...", "model": "..."}` (baseUrl and model optional) or the bare key;
  * the base URL is the secret's `baseUrl`, else the declared connector's `baseUrl`; the request goes to
    `{base}/chat/completions` with `Authorization: Bearer <key>`.
What is sent: `model` (step, else secret, else `gpt-4o-mini`), `messages` = a system message describing the JSON
answer expected (when there is a `schema`) and the user message = the rendered `prompt` (a Jinja2 template over
the run state, rendered by the interpreter like every parameter) followed by `input` as JSON when given,
`max_tokens` = `maxOutputTokens`, `temperature: 0`.
The answer: `choices[0].message.content`, parsed as a JSON object (a ```json fence is tolerated) and checked against
`schema` (`field: 'string' | 'number' | 'integer' | 'boolean' | 'a|b|c'` = one of those strings); every schema
field is required and fields not in it are dropped. A failing answer is `E_BOT_INVALID_ANSWER` (retryable: a
model may answer well next time). Without a schema the result is `{"text": content}`.
HTTP failures follow the http connector: `E_UPSTREAM_<status>` (retryable for 408, 429, 5xx, with `Retry-After`),
`E_NETWORK`, `E_STEP_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from ..compiler.models.params import BotInvokeParams
from ..errors import E_BOT_INVALID_ANSWER, E_NETWORK, E_PARAMS_INVALID, E_STEP_TIMEOUT, A44Error
from .http import DEFAULT_RETRY_ON, join_url, retry_after_ms
from .protocol import StepContext
from .sessions import OwnSession

DEFAULT_MODEL = "gpt-4o-mini"
MAX_ANSWER_BYTES = 1_048_576
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)
_SCALARS = {"string": str, "number": (int, float), "integer": int, "boolean": bool}


def check_answer(content: str, schema: dict[str, str] | None) -> Any:
    """The validated answer object, or E_BOT_INVALID_ANSWER saying what is wrong (never echoing the whole answer)."""
    if schema is None:
        return {"text": content}
    m = _FENCE.match(content or "")
    text = m.group(1) if m else (content or "")
    try:
        doc = json.loads(text)
    except ValueError:
        raise A44Error(E_BOT_INVALID_ANSWER, f"the answer is not JSON ({len(text)} characters)",
                       details={"retryable": True}) from None
    if not isinstance(doc, dict):
        raise A44Error(E_BOT_INVALID_ANSWER, "the answer is not a JSON object", details={"retryable": True})
    problems = []
    out: dict[str, Any] = {}
    for field, spec in schema.items():
        if field not in doc:
            problems.append(f"{field}: missing")
            continue
        value = doc[field]
        if spec in _SCALARS:
            ok = isinstance(value, _SCALARS[spec]) and not (spec != "boolean" and isinstance(value, bool))
            if not ok:
                problems.append(f"{field}: expected {spec}")
        else:
            allowed = spec.split("|")
            if value not in allowed:
                problems.append(f"{field}: expected one of {', '.join(allowed)}")
        out[field] = value
    if problems:
        raise A44Error(E_BOT_INVALID_ANSWER, "the answer does not match the schema: " + "; ".join(problems),
                       details={"retryable": True, "problems": problems})
    return out


def _system(schema: dict[str, str]) -> str:
    fields = []
    for field, spec in schema.items():
        if spec in _SCALARS:
            fields.append(f'"{field}": <{spec}>')
        else:
            fields.append(f'"{field}": one of ' + ", ".join(f'"{v}"' for v in spec.split("|")))
    return ("Answer with a single JSON object and nothing else, with exactly these fields: {"
            + ", ".join(fields) + "}.")


class BotInvokeConnector:
    name = "bot/invoke"
    params_model = BotInvokeParams

    def __init__(self) -> None:
        self._own = OwnSession()

    async def aclose(self) -> None:
        await self._own.aclose()

    async def _endpoint(self, p: BotInvokeParams, ctx: StepContext) -> tuple[str, str, str]:
        decl = ctx.declared or {}
        ref = p.secretRef or (decl.get("auth") or {}).get("secretRef")
        if not ref:
            raise A44Error(E_PARAMS_INVALID, "bot/invoke needs `secretRef` (or a declared connector with "
                                             "`auth.secretRef`) naming the endpoint's key")
        raw = await ctx.secret(ref)
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            key = doc.get("apiKey") or doc.get("api_key") or ""
            base = doc.get("baseUrl") or doc.get("base_url") or decl.get("baseUrl")
            model = p.model or doc.get("model") or DEFAULT_MODEL
        else:
            key, base, model = raw, decl.get("baseUrl"), p.model or DEFAULT_MODEL
        if not base or not str(base).lower().startswith(("http://", "https://")):
            raise A44Error(E_PARAMS_INVALID, f"bot/invoke: no http(s) base URL in secret {ref} or the connector")
        return join_url(str(base), "/chat/completions"), str(key), str(model)

    async def invoke(self, params: Any, ctx: StepContext) -> Any:
        p = params if isinstance(params, BotInvokeParams) else BotInvokeParams.model_validate(params)
        url, key, model = await self._endpoint(p, ctx)
        user = p.prompt
        if p.input:
            user += "\n\n" + json.dumps(p.input, ensure_ascii=False, default=str)
        messages = []
        if p.schema_:
            messages.append({"role": "system", "content": _system(p.schema_)})
        messages.append({"role": "user", "content": user})
        body = {"model": model, "messages": messages, "max_tokens": p.maxOutputTokens, "temperature": 0}
        headers = {"Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key}
        if key:
            headers["Authorization"] = f"Bearer {key}"

        remaining = ctx.deadline - time.monotonic()
        decl = ctx.declared or {}
        if decl.get("timeout"):
            remaining = min(remaining, decl["timeout"] / 1000)
        if remaining <= 0:
            raise A44Error(E_STEP_TIMEOUT, "no time left to ask the model")
        import aiohttp

        session = self._own.get(ctx)
        try:
            async with asyncio.timeout(remaining):
                async with session.post(url, json=body, headers=headers, allow_redirects=False,
                                        timeout=aiohttp.ClientTimeout(total=remaining)) as resp:
                    raw = await resp.content.read(MAX_ANSWER_BYTES)
                    status = resp.status
                    retry_after = resp.headers.get("retry-after")
        except TimeoutError:
            raise A44Error(E_STEP_TIMEOUT, f"the model at {url} did not answer within {remaining:.3f} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise A44Error(E_NETWORK, f"POST {url} failed: {type(exc).__name__}: {exc}") from None
        if status >= 300:
            retryable = status in DEFAULT_RETRY_ON
            details: dict[str, Any] = {"retryable": retryable, "status": status,
                                       "body": raw[:2000].decode("utf-8", errors="replace")}
            after = retry_after_ms(retry_after) if retryable else None
            if after is not None:
                details["retry_after_ms"] = after
            raise A44Error(f"E_UPSTREAM_{status}", f"the model endpoint {url} answered {status}", details=details)
        try:
            doc = json.loads(raw)
            choice = doc["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise A44Error(E_BOT_INVALID_ANSWER, f"the endpoint {url} did not answer in the chat-completions format",
                           details={"retryable": True}) from None
        if not isinstance(content, str):
            raise A44Error(E_BOT_INVALID_ANSWER, "the answer has no text content", details={"retryable": True})
        return check_answer(content, p.schema_)
