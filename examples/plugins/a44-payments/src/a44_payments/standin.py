"""A tiny stand-in for the payments API, for the demo and the tests (in memory; not a payments system).

    python -m a44_payments.standin [--host 127.0.0.1] [--port 8089] [--fail-authorize 503 --fail-times 2]
                                   [--decline-over CENTS]

Prints `a44-payments stand-in listening on http://HOST:PORT` once it accepts connections (`--port 0` picks a free
port). Endpoints:

  POST /v1/authorizations               Idempotency-Key required (400 without). 201 + the new authorization; the
                                        same key again: 200 + the same authorization (header Idempotent-Replayed)
  POST /v1/authorizations/{ref}/void    ref = authorization id or the key it was created with; 200 + the
                                        authorization, now `voided` (voiding twice is harmless); 404 if unknown
  GET  /v1/authorizations[/{ref}]       what it holds
  GET  /_standin/state                  {"authorizations": [...], "requests": [{method, path, idempotency_key,
                                        status}]} - what the tests assert on
  POST /_standin/fail                   {"path": "/v1/authorizations", "status": 503, "times": 2, "retryAfter": 1}:
                                        the next `times` POSTs to `path` answer `status` (times -1: until
                                        cleared; `/v1/authorizations` is exact, other paths are prefixes, and
                                        "suffix": "/void" narrows them); {"clear": true} removes every rule
  GET  /healthz

Amounts above `--decline-over` (default: never) are declined with 402.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import signal
import sys
from datetime import datetime, timezone

from aiohttp import web


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PaymentsStandIn:
    def __init__(self, *, decline_over: int | None = None):
        self.by_key: dict[str, dict] = {}
        self.by_id: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.fail_rules: list[dict] = []
        self.decline_over = decline_over

    # --- failure injection --------------------------------------------------------------------------------------
    def add_failure(self, path: str, status: int, times: int = 1, retry_after: float | None = None,
                    suffix: str | None = None) -> None:
        """The next `times` POSTs to a path starting with `path` (and ending with `suffix`) answer `status`."""
        self.fail_rules.append({"path": path, "suffix": suffix, "status": int(status), "times": int(times),
                                "retryAfter": retry_after})

    @staticmethod
    def _matches(rule: dict, path: str) -> bool:
        if rule.get("suffix"):
            return path.startswith(rule["path"]) and path.endswith(rule["suffix"])
        return path == rule["path"] if rule["path"] == "/v1/authorizations" else path.startswith(rule["path"])

    def _injected(self, path: str) -> web.Response | None:
        for rule in self.fail_rules:
            if self._matches(rule, path) and rule["times"] != 0:
                if rule["times"] > 0:
                    rule["times"] -= 1
                headers = {"Retry-After": str(rule["retryAfter"])} if rule.get("retryAfter") is not None else {}
                return web.json_response({"code": "INJECTED", "message": f"injected failure {rule['status']}"},
                                         status=rule["status"], headers=headers)
        return None

    # --- the app ------------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_post("/v1/authorizations", self.authorize)
        app.router.add_post("/v1/authorizations/{ref}/void", self.void)
        app.router.add_get("/v1/authorizations", self.list)
        app.router.add_get("/v1/authorizations/{ref}", self.get)
        app.router.add_get("/_standin/state", self.state)
        app.router.add_post("/_standin/fail", self.fail)
        app.router.add_get("/healthz", self.healthz)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler):
        entry = {"at": _now(), "method": request.method, "path": request.path,
                 "idempotency_key": request.headers.get("Idempotency-Key")}
        if request.path.startswith("/v1/"):
            self.requests.append(entry)
            resp = self._injected(request.path) if request.method == "POST" else None
            if resp is None:
                resp = await handler(request)
        else:
            resp = await handler(request)
        entry["status"] = resp.status
        return resp

    async def authorize(self, request: web.Request) -> web.Response:
        key = request.headers.get("Idempotency-Key")
        if not key:
            return web.json_response({"code": "IDEMPOTENCY_KEY_REQUIRED",
                                      "message": "send an Idempotency-Key header"}, status=400)
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"code": "BAD_JSON", "message": "the body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"code": "BAD_JSON", "message": "the body must be an object"}, status=400)
        known = self.by_key.get(key)
        if known is not None:
            return web.json_response(known, status=200, headers={"Idempotent-Replayed": "true"})
        amount = body.get("amountCents")
        if self.decline_over is not None and isinstance(amount, int) and amount > self.decline_over:
            return web.json_response({"code": "DECLINED",
                                      "message": f"amount {amount} over the limit of {self.decline_over}"},
                                     status=402)
        auth = {"authorizationId": "auth_" + secrets.token_hex(8), "idempotencyKey": key, "status": "authorized",
                "amountCents": amount, "currency": body.get("currency") or "BRL",
                "reference": body.get("reference"), "runId": body.get("runId"), "stepId": body.get("stepId"),
                "createdAt": _now(), "voidedAt": None}
        self.by_key[key] = auth
        self.by_id[auth["authorizationId"]] = auth
        return web.json_response(auth, status=201)

    def _find(self, ref: str) -> dict | None:
        return self.by_id.get(ref) or self.by_key.get(ref)

    async def void(self, request: web.Request) -> web.Response:
        auth = self._find(request.match_info["ref"])
        if auth is None:
            return web.json_response({"code": "NOT_FOUND",
                                      "message": f"no authorization {request.match_info['ref']!r}"}, status=404)
        if auth["status"] != "voided":
            auth["status"] = "voided"
            auth["voidedAt"] = _now()
        return web.json_response(auth, status=200)

    async def list(self, request: web.Request) -> web.Response:
        return web.json_response({"authorizations": list(self.by_id.values())})

    async def get(self, request: web.Request) -> web.Response:
        auth = self._find(request.match_info["ref"])
        if auth is None:
            return web.json_response({"code": "NOT_FOUND", "message": "unknown authorization"}, status=404)
        return web.json_response(auth)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def state(self, request: web.Request) -> web.Response:
        return web.json_response({"authorizations": list(self.by_id.values()), "requests": self.requests,
                                  "fail_rules": self.fail_rules})

    async def fail(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("clear"):
            self.fail_rules.clear()
        else:
            self.add_failure(body.get("path", "/v1/"), body["status"], body.get("times", 1), body.get("retryAfter"),
                             body.get("suffix"))
        return web.json_response({"fail_rules": self.fail_rules})


async def serve(host: str, port: int, standin: PaymentsStandIn, stop: asyncio.Event) -> None:
    runner = web.AppRunner(standin.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]
    print(f"a44-payments stand-in listening on http://{host}:{bound}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m a44_payments.standin", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8089, help="0 picks a free port (printed)")
    ap.add_argument("--fail-authorize", type=int, metavar="STATUS",
                    help="answer STATUS to the first --fail-times authorization requests")
    ap.add_argument("--fail-void", type=int, metavar="STATUS",
                    help="answer STATUS to the first --fail-times void requests")
    ap.add_argument("--fail-times", type=int, default=1, help="how many requests fail (-1: all)")
    ap.add_argument("--decline-over", type=int, metavar="CENTS", help="decline (402) amounts above CENTS")
    args = ap.parse_args(argv)
    standin = PaymentsStandIn(decline_over=args.decline_over)
    if args.fail_authorize:
        standin.add_failure("/v1/authorizations", args.fail_authorize, args.fail_times)
    if args.fail_void:
        standin.add_failure("/v1/authorizations/", args.fail_void, args.fail_times, suffix="/void")

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(args.host, args.port, standin, stop)

    try:
        asyncio.run(run())
    except OSError as exc:
        print(f"a44-payments stand-in: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
