"""`uses: http` (and declared connectors of type `http`): one HTTP request, its response captured as the result.

What this module decides, so the interpreter does not have to:
  * where the request goes: `url`, or `path` joined to the declared connector's `baseUrl`;
  * what is sent: declared headers, then the step's; `Idempotency-Key: {run_id}:{step_id}` (§2) unless the
    step sets that header itself; bearer auth from a secret; `json` (JSON) or `body` (raw string, else JSON);
  * how long it may take: until `ctx.deadline` (and at most the declared `timeout`);
  * what came back: `{"status", "headers": {content-type, etag, location, retry-after present},
    "json": ... | "text": ...}`, the body read up to `maxResponseBytes` (beyond it: text cut there and
    `"truncated": true`); a JSON content type whose body does not parse gives `text` and `"invalidJson": true`;
  * how a failure is classified (§6.3, §14): a status in `retryOn` (default 408, 429, 500, 502, 503, 504) is a
    retryable `E_UPSTREAM_<status>`, any other status >= 400 a permanent one; `details["retryable"]` always says
    which, because a custom `retryOn` can disagree with the code's default; `Retry-After` (seconds or an HTTP
    date) on a retryable status becomes `details["retry_after_ms"]`; connection failures are `E_NETWORK`,
    running out of time `E_STEP_TIMEOUT`;
  * which flow key a call counts against (`flow_key`, §22): a retryable 429, and a retryable 503 that carries a
    readable `Retry-After`, are `E_UPSTREAM_429` (`details.status` says which), and the registry pauses the key
    for every run (pauses.py). A 503 whose `Retry-After` cannot be read stays a plain `E_UPSTREAM_503`.
One aiohttp session per connector instance (so per registry), created on first use in the running event loop and
closed by `aclose()`.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import time
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

from ..compiler.models.params import DEFAULT_MAX_PAUSE_MS, HttpParams, VpnHttpParams
from ..errors import E_AUTH_FAILED, E_NETWORK, E_PARAMS_INVALID, E_STEP_TIMEOUT, E_TUNNEL_DOWN, E_UPSTREAM_429, A44Error
from ..redact import redact
from .network import resolve_route
from .pauses import FlowKey
from .protocol import StepContext
from .services import CLOCK, NETWORKS, NETWORKS_FILE
from .sessions import OwnSession

DEFAULT_RETRY_ON = (408, 429, 500, 502, 503, 504)
CAPTURED_HEADERS = ("content-type", "etag", "location", "retry-after")
ERROR_BODY_CHARS = 2_000     # of an error response kept in details, to show what the far side said
_CHUNK = 64 * 1024


def retry_after_ms(value: str | None, now: float | None = None) -> int | None:
    """`Retry-After` as milliseconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None if absent
    or unparseable (the interpreter then uses its own backoff)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = time.time() if now is None else now
    return max(0, int((when.timestamp() - now) * 1000))


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


def _query_pairs(query: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Query values as strings: None is dropped, a list repeats the key, booleans are `true`/`false`."""
    pairs: list[tuple[str, str]] = []
    for key, value in (query or {}).items():
        for v in value if isinstance(value, list) else [value]:
            if v is None:
                continue
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, (dict, list)):
                v = json.dumps(v, separators=(",", ":"))
            pairs.append((key, str(v)))
    return pairs


class HttpConnector:
    name = "http"
    params_model = HttpParams

    def __init__(self) -> None:
        self._own = OwnSession(lambda aiohttp: aiohttp.TCPConnector(limit=256, ttl_dns_cache=60), auto_decompress=True)
        self._tokens: dict[tuple, tuple[str, float]] = {}      # oauth2: key -> (access token, expiry monotonic)
        self._token_locks: dict[tuple, asyncio.Lock] = {}
        self.monotonic = time.monotonic                       # tests move token expiry without sleeping

    async def aclose(self) -> None:
        await self._own.aclose()

    def warm(self) -> None:
        """Make the client session on the running loop now (a daemon's warm-up): importing aiohttp and the TLS
        context its connector builds cost the first request ~0.1-0.5 s otherwise."""
        self._own.get()

    def flow_key(self, params: Any, decl: dict[str, Any], uses: str, project_id: str) -> FlowKey:
        """The key this call counts against (pauses.py): `rateKey` of the step, else of the declared connector,
        else `<uses>:<project>:<host of the URL>`; and its `maxPause` the same way (default 1 h)."""
        p = params if isinstance(params, self.params_model) else self.params_model.model_validate(params)
        key = p.rateKey or decl.get("rateKey")
        if not key:
            try:
                host = urlsplit(self._target(p, decl)).hostname or ""
            except (A44Error, ValueError):
                host = ""       # the call itself reports the bad URL
            key = f"{uses}:{project_id}:{host}"
        max_pause = p.maxPause or decl.get("maxPause") or DEFAULT_MAX_PAUSE_MS
        return FlowKey(key, int(max_pause))

    # -- one request ----------------------------------------------------------------------------------------------
    async def _route(self, p: HttpParams, decl: dict[str, Any], ctx: StepContext) -> tuple[Any, dict[str, Any], Any]:
        """(session, extra request kwargs, route) of this request: the default route for `http`."""
        return self._own.get(ctx), {}, None

    def _connect_error(self, exc: BaseException, method: str, url: str, route: Any = None) -> A44Error:
        return A44Error(E_NETWORK, f"{method} {url} failed: {type(exc).__name__}: {exc}")

    async def invoke(self, params: Any, ctx: StepContext) -> dict[str, Any]:
        p = params if isinstance(params, self.params_model) else self.params_model.model_validate(params)
        decl = ctx.declared or {}
        url = self._url(p, decl)
        headers = await self._headers(p, decl, ctx)
        retry_on = set(p.retryOn if p.retryOn is not None else decl.get("retryOn") or DEFAULT_RETRY_ON)
        kwargs: dict[str, Any] = {}
        if p.json_ is not None and p.body is not None:
            raise A44Error(E_PARAMS_INVALID, "an http step takes `json` or `body`, not both")
        if p.json_ is not None:
            kwargs["json"] = p.json_
        elif isinstance(p.body, str):
            kwargs["data"] = p.body.encode()
        elif p.body is not None:
            kwargs["json"] = p.body

        remaining = ctx.deadline - time.monotonic()
        if decl.get("timeout"):
            remaining = min(remaining, decl["timeout"] / 1000)
        if remaining <= 0:
            raise A44Error(E_STEP_TIMEOUT, f"no time left for {p.method} {url}")
        deadline = time.monotonic() + remaining

        import aiohttp

        session, route_kw, route = await self._route(p, decl, ctx)
        auth = decl.get("auth") or {}
        oauth = auth.get("kind") == "oauth2-client-credentials"
        try:
            async with asyncio.timeout(remaining):
                token = None
                if oauth:
                    token = await self._oauth_token(session, route_kw, auth, decl, ctx, deadline)
                    headers["Authorization"] = f"Bearer {token}"
                result = await self._send(session, p, url, headers, kwargs, route_kw, deadline)
                if oauth and result["status"] == 401:
                    # the token may have been revoked or expired early: one fresh token, one more request
                    self._forget_token(auth, decl, ctx, token)
                    token = await self._oauth_token(session, route_kw, auth, decl, ctx, deadline)
                    headers["Authorization"] = f"Bearer {token}"
                    result = await self._send(session, p, url, headers, kwargs, route_kw, deadline)
        except TimeoutError:  # asyncio.timeout, and aiohttp's ServerTimeoutError subclasses it
            raise A44Error(E_STEP_TIMEOUT, f"{p.method} {url} did not finish within {remaining:.3f} s") from None
        except aiohttp.InvalidURL as exc:
            raise A44Error(E_PARAMS_INVALID, f"invalid URL {str(exc.url)!r}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise self._connect_error(exc, p.method, url, route) from None
        clock = ctx.services.get(CLOCK)
        self._classify(p.method, url, result, retry_on, clock.now().timestamp() if clock is not None else None)
        return result

    async def _send(self, session, p: HttpParams, url: str, headers: dict[str, str], kwargs: dict[str, Any],
                    route_kw: dict[str, Any], deadline: float) -> dict[str, Any]:
        import aiohttp

        left = max(deadline - time.monotonic(), 0.001)
        async with session.request(
                p.method, url, headers=headers, params=_query_pairs(p.query),
                allow_redirects=p.method in ("GET", "HEAD"),
                timeout=aiohttp.ClientTimeout(total=left), **route_kw, **kwargs) as resp:
            return await self._capture(resp, p.maxResponseBytes)

    # -- oauth2 client credentials ---------------------------------------------------------------------------------
    def _token_key(self, auth: dict[str, Any], decl: dict[str, Any], ctx: StepContext) -> tuple:
        return (ctx.project_id, self._token_url(auth, decl), auth.get("secretRef"), auth.get("scope"))

    @staticmethod
    def _token_url(auth: dict[str, Any], decl: dict[str, Any]) -> str:
        if auth.get("tokenUrl"):
            return auth["tokenUrl"]
        if decl.get("baseUrl"):
            return join_url(decl["baseUrl"], "/oauth/token")
        raise A44Error(E_PARAMS_INVALID, "oauth2-client-credentials needs `auth.tokenUrl` (or a `baseUrl`)")

    def _forget_token(self, auth, decl, ctx, token: str | None) -> None:
        key = self._token_key(auth, decl, ctx)
        cached = self._tokens.get(key)
        if cached is not None and cached[0] == token:
            del self._tokens[key]

    async def _oauth_token(self, session, route_kw: dict[str, Any], auth: dict[str, Any], decl: dict[str, Any],
                           ctx: StepContext, deadline: float) -> str:
        """A cached access token, or a new one from the token endpoint (client credentials grant, RFC 6749 §4.4,
        client authenticated with HTTP Basic). Cached until `expires_in` minus a margin; one fetch at a time per
        (project, token URL, secret, scope). The token is concealed in the attempt (`ctx.conceal`): a far side
        that echoes it cannot get it into a result, an error or the log."""
        key = self._token_key(auth, decl, ctx)
        cached = self._tokens.get(key)
        if cached is None or cached[1] <= self.monotonic():
            async with self._token_locks.setdefault(key, asyncio.Lock()):
                cached = self._tokens.get(key)
                if cached is None or cached[1] <= self.monotonic():
                    token, lifetime = await self._fetch_token(session, route_kw, auth, decl, ctx, deadline)
                    margin = min(60.0, lifetime * 0.1)
                    cached = self._tokens[key] = (token, self.monotonic() + lifetime - margin)
        ctx.conceal(cached[0])
        return cached[0]

    async def _fetch_token(self, session, route_kw, auth, decl, ctx, deadline) -> tuple[str, float]:
        import aiohttp

        ref = auth.get("secretRef")
        raw = await ctx.secret(ref)
        try:
            cred = json.loads(raw)
        except ValueError:
            cred = None
        if not isinstance(cred, dict):
            raise A44Error(E_AUTH_FAILED, f"secret {ref} must be JSON {{\"client_id\": ..., \"client_secret\": ...}}"
                                          f" for oauth2-client-credentials")
        cid = cred.get("client_id") or cred.get("clientId")
        csecret = cred.get("client_secret") or cred.get("clientSecret")
        if not cid or not csecret:
            raise A44Error(E_AUTH_FAILED, f"secret {ref} lacks client_id or client_secret")
        url = self._token_url(auth, decl)
        form = {"grant_type": "client_credentials"}
        if auth.get("scope"):
            form["scope"] = auth["scope"]
        left = max(deadline - time.monotonic(), 0.001)
        basic = base64.b64encode(f"{cid}:{csecret}".encode()).decode("ascii")
        async with session.post(url, data=form, headers={"Accept": "application/json",
                                                         "Authorization": f"Basic {basic}"}, allow_redirects=False,
                                timeout=aiohttp.ClientTimeout(total=left), **route_kw) as resp:
            body = await resp.content.read(64 * 1024)
            status = resp.status
            retry_after = resp.headers.get("retry-after")
        if status in DEFAULT_RETRY_ON:
            details: dict[str, Any] = {"retryable": True, "status": status}
            after = retry_after_ms(retry_after)
            if after is not None:
                details["retry_after_ms"] = after
            raise A44Error(f"E_UPSTREAM_{status}", f"the token endpoint {url} answered {status}", details=details)
        if status >= 300:
            raise A44Error(E_AUTH_FAILED, f"the token endpoint {url} refused the client credentials of {ref} "
                                          f"({status})", details={"status": status})
        try:
            doc = json.loads(body)
            token = doc["access_token"]
            if not isinstance(token, str) or not token:
                raise ValueError("empty access_token")
            lifetime = float(doc.get("expires_in") or 3600)
        except (ValueError, KeyError, TypeError):
            raise A44Error(E_AUTH_FAILED, f"the token endpoint {url} answered without a usable access_token") from None
        return token, max(lifetime, 0.0)

    @classmethod
    def _url(cls, p: HttpParams, decl: dict[str, Any]) -> str:
        url = cls._target(p, decl)
        if not url.lower().startswith(("http://", "https://")):
            raise A44Error(E_PARAMS_INVALID, f"an http step needs an http:// or https:// URL, got {url[:200]!r}")
        return url

    @staticmethod
    def _target(p: HttpParams, decl: dict[str, Any]) -> str:
        if p.url:
            return p.url
        if p.path is not None:
            base = decl.get("baseUrl")
            if not base:
                raise A44Error(E_PARAMS_INVALID, "`path` needs a declared connector with a `baseUrl`; "
                                                 "use `url` with `uses: http`")
            return join_url(base, p.path)
        raise A44Error(E_PARAMS_INVALID, "an http step needs `url` (or `path` on a declared connector)")

    @staticmethod
    async def _headers(p: HttpParams, decl: dict[str, Any], ctx: StepContext) -> dict[str, str]:
        headers: dict[str, str] = {}
        for source in (decl.get("headers"), p.headers):
            for k, v in (source or {}).items():
                headers[k] = str(v)
        lower = {k.lower() for k in headers}
        if "idempotency-key" not in lower:
            headers["Idempotency-Key"] = ctx.idempotency_key
        auth = decl.get("auth")
        if auth:
            kind = auth.get("kind")
            if kind == "bearer":
                token = await ctx.secret(auth["secretRef"])
                headers["Authorization"] = f"Bearer {token}"
            elif kind != "oauth2-client-credentials":   # that one is added per request (token cache, 401 refresh)
                raise A44Error(E_PARAMS_INVALID, f"auth kind {kind!r} is not supported by the http connector",
                               hint="use `bearer` or `oauth2-client-credentials`")
        return headers

    @staticmethod
    async def _capture(resp, cap: int) -> dict[str, Any]:
        # read at most cap + 1 bytes: enough to know the body was larger, never the whole of a huge body
        buf = bytearray()
        while len(buf) <= cap:
            chunk = await resp.content.read(min(_CHUNK, cap + 1 - len(buf)))
            if not chunk:
                break
            buf += chunk
        truncated = len(buf) > cap
        body = bytes(buf[:cap])
        result: dict[str, Any] = {
            "status": resp.status,
            "headers": {h: resp.headers[h] for h in CAPTURED_HEADERS if h in resp.headers},
        }
        charset = resp.charset or "utf-8"
        ctype = resp.headers.get("content-type", "").lower()
        invalid_json = False
        if not truncated and body and ("json" in ctype.split(";")[0]):
            try:
                result["json"] = json.loads(body.decode(charset, errors="strict"))
                return result
            except (ValueError, LookupError):
                # a JSON content type with a body that is not JSON: not an error of the step (the far side
                # answered, maybe applied the effect); the text is kept and flagged so a workflow can test it
                invalid_json = True
        try:
            result["text"] = body.decode(charset, errors="replace")
        except LookupError:
            result["text"] = body.decode("utf-8", errors="replace")
        if truncated:
            result["truncated"] = True
        if invalid_json:
            result["invalidJson"] = True
        return result

    @staticmethod
    def _classify(method: str, url: str, result: dict[str, Any], retry_on: set[int], now: float | None = None) -> None:
        """Raise the error a status >= 400 (or one in `retryOn`) is; `now`: the clock's instant (epoch seconds)
        that an HTTP-date `Retry-After` is counted from."""
        status = result["status"]
        retryable = status in retry_on
        if status < 400 and not retryable:
            return
        details: dict[str, Any] = {"retryable": retryable, "status": status}
        code = f"E_UPSTREAM_{status}"
        if retryable:
            after = retry_after_ms(result["headers"].get("retry-after"), now)
            if after is not None:
                details["retry_after_ms"] = after
            if status == 429 or (status == 503 and after is not None):
                code = E_UPSTREAM_429       # the far side asked to slow down: its flow key pauses (§22)
        if "json" in result:
            details["body"] = result["json"]
            if len(json.dumps(details["body"], default=str)) > ERROR_BODY_CHARS:
                details["body"] = json.dumps(details["body"], default=str)[:ERROR_BODY_CHARS]
        elif result.get("text"):
            details["body"] = result["text"][:ERROR_BODY_CHARS]
        details = redact(details)
        kind = "retryable" if retryable else "permanent"
        raise A44Error(code, f"{method} {url} answered {status} ({kind})", details=details)


_TUNNEL_ERRNOS = {99, 101, 113}   # EADDRNOTAVAIL (the VPN address is gone), ENETUNREACH, EHOSTUNREACH (Linux)


class VpnHttpConnector(HttpConnector):
    """`uses: vpn/http`: `http` routed through the project's named private `network` (network.py): through its
    egress proxy or bound to its local address. When the route cannot be used the step fails with
    `E_TUNNEL_DOWN` (retryable) and nothing is sent any other way: there is no fallback to the default route."""

    name = "vpn/http"
    params_model = VpnHttpParams

    def __init__(self) -> None:
        super().__init__()
        self._bound: dict[str, Any] = {}       # local address -> session whose connections bind to it

    async def _route(self, p, decl, ctx):
        network = getattr(p, "network", None) or decl.get("network")
        if not network:
            raise A44Error(E_PARAMS_INVALID, "a vpn/http step needs a `network` (on the step or its connector)")
        route = resolve_route(ctx.project_id, network, ctx.services.get(NETWORKS),
                              path=ctx.services.get(NETWORKS_FILE))
        if route.proxy:
            # a session of our own (never the shared one: it could carry other defaults); the proxy is explicit
            return self._own.get(_Private(ctx)), {"proxy": route.proxy}, route
        return await self._bound_session(route.local_address), {}, route

    async def _bound_session(self, address: str):
        import aiohttp

        loop = asyncio.get_running_loop()
        sess = self._bound.get(address)
        if sess is None or sess.closed or sess._loop is not loop:
            sess = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, local_addr=(address, 0), ttl_dns_cache=60),
                trust_env=False)
            self._bound[address] = sess
        return sess

    def _connect_error(self, exc: BaseException, method: str, url: str, route: Any = None) -> A44Error:
        import aiohttp

        if route is not None:
            down = isinstance(exc, (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError))
            if route.local_address is not None and isinstance(exc, (aiohttp.ClientConnectorError, OSError)):
                errno = getattr(getattr(exc, "os_error", exc), "errno", None)
                down = down or errno in _TUNNEL_ERRNOS
            if down:
                return A44Error(E_TUNNEL_DOWN, f"{method} {url}: network {route.network!r} ({route.describe()}) is "
                                               f"unavailable: {type(exc).__name__}; nothing was sent by another route",
                                details={"retryable": True, "network": route.network})
        return super()._connect_error(exc, method, url, route)

    async def aclose(self) -> None:
        await super().aclose()
        for sess in self._bound.values():
            if not sess.closed:
                await sess.close()
        self._bound.clear()


class _Private:
    """A context view without the shared `http_session`, so vpn/http always uses a session of its own."""

    def __init__(self, ctx: StepContext):
        self.services = {k: v for k, v in ctx.services.items() if k != "http_session"}
