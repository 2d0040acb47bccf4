"""`RemoteAutomation`: the methods of `Automation` the CLI verbs call (publish, run, wait, get_run, runs, logs,
follow, resolve, skip, partitions; events through `ingestion()`; the other services: remote_services.py), over a
daemon's REST API `/v1/automation` (docs/api.md) with
`Authorization: Bearer <token>`, returning the same objects, so the CLI prints the same views and JSON. Every call
is built from the endpoint table the server routes (contract/endpoints.py); `publish`, `run` and `publish_event`
read their answers through the routes' answer models (contract/models/). Both sides implement the service
Protocols of contract/services.py.

    async with RemoteAutomation("http://host:8044", token, "pj_checkout_prod") as auto:
        handle = await auto.run("wf_invoice_settle", {"invoiceId": "inv_8812"}, "manual-inv_8812", wait=True)

Errors come back as the `A44Error` the local path raises: the server answers `{"error": {code, message, hint}}`;
401 is `E_TOKEN_INVALID`, 403 `E_FORBIDDEN`, each with a hint naming `a44 auth login`. An unreachable server is
`E_API_UNAVAILABLE`; an answer that is not an a44 answer is `E_API`. aiohttp is imported on first use only.

Waiting (`run --wait`) and `logs --follow` read the run's server-sent events (no polling); a dropped stream is
resumed with `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..durations import parse_duration, reconnect_delay
from ..errors import (
    E_API,
    E_API_UNAVAILABLE,
    E_FORBIDDEN,
    E_INVALID_ARGUMENT,
    E_REMOTE_UNSUPPORTED,
    E_TOKEN_INVALID,
    A44Error,
)
from .automation import InvalidArgument, RunHandle, RunPage, require_idempotency_key, workflow_ref
from .contract import endpoints as ep
from .contract.endpoints import Call
from .contract.models import events as ev
from .contract.models import runs as rm
from .contract.services import EventsService, RunsService
from .remote_deploys import RemoteDeploys
from .uploads import upload_texts

_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_STREAM_RETRIES = 5
M = TypeVar("M", bound=BaseModel)


def _when(value: Any) -> Any:
    if isinstance(value, str) and _ISO.match(value):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value


def timestamps(doc: dict) -> dict:
    """The view's instants (`*_at`, `at`) back to datetimes, as the local views hold them (JSON round-trips: the
    server wrote them with `jsonenc.iso`, to_json writes them again the same way)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "at" or k.endswith("_at"):
                doc[k] = _when(v)
    return doc


def _error(code: str, message: str, hint: str | None = None, details: Any = None,
           step_id: str | None = None) -> A44Error:
    """The server's coded error as the local path raises it; `details` as the server gave them (docs/errors.md
    marks the codes that carry them), so the CLI prints the same lines either way."""
    details = details if isinstance(details, dict) else None
    if code == E_INVALID_ARGUMENT:
        err = InvalidArgument(message, hint=hint)
        err.details = details or {}
        return err
    return A44Error(code, message, hint=hint, details=details, step_id=step_id)


class RemoteAutomation(RemoteDeploys, RunsService):
    remote = True

    def __init__(self, url: str, token: str, project: str, *, send_project: bool = True,
                 request_timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.project = project
        self._token = token
        self._send_project = send_project
        self._timeout = request_timeout
        self._session = None

    def __repr__(self) -> str:  # never the token
        return f"RemoteAutomation({self.url!r}, project={self.project!r})"

    # --- lifecycle ---------------------------------------------------------------------------------------
    async def _http(self):
        if self._session is None:
            import aiohttp

            headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json",
                       "User-Agent": "a44-cli"}
            if self._send_project:
                headers["A44-Project"] = self.project
            self._session = aiohttp.ClientSession(headers=headers)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RemoteAutomation:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- HTTP ------------------------------------------------------------------------------------------------
    def _login_hint(self) -> str:
        return f"a44 auth login --project {self.project} --url {self.url} --token T (a44 auth status shows the " \
               f"stored login)"

    def _unavailable(self, exc: BaseException) -> A44Error:
        return A44Error(E_API_UNAVAILABLE, f"cannot reach the a44 API at {self.url}: {exc or type(exc).__name__}",
                        hint="is the daemon running with --http-port (a44 automation serve --http-port 8044)? "
                             "--verbose shows which server the verb used; --local uses the database instead")

    def _coded(self, status: int, doc: Any, text: str, what: str) -> A44Error:
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            code, message, hint = err["code"], str(err.get("message", "")), err.get("hint")
            if status == 401 or code == E_TOKEN_INVALID:
                hint = hint or f"log in again with a valid token: {self._login_hint()}"
            elif status == 403 or code == E_FORBIDDEN:
                hint = hint or ("this verb needs a token with automation:write (`a44 auth token create --scope "
                                f"automation:write` on the daemon's host), then {self._login_hint()}"
                                if "scope" in message else f"check the token's project and networks: "
                                                           f"{self._login_hint()}")
            return _error(code, message, hint, err.get("details"))
        if status == 401:
            return A44Error(E_TOKEN_INVALID, f"{what}: the server refused the token (HTTP 401)",
                            hint=self._login_hint())
        if status == 403:
            return A44Error(E_FORBIDDEN, f"{what}: the server refused the request (HTTP 403)",
                            hint=self._login_hint())
        shown = " ".join(text.split())[:200]
        return A44Error(E_API, f"{what} answered HTTP {status}" + (f": {shown}" if shown else ""),
                        hint=f"is {self.url} an a44 daemon? (GET {self.url}{ep.OPENAPI.path} should answer)")

    async def _call(self, call: Call, *, body: Any = None, params: dict | None = None) -> tuple[int, Any]:
        """(status, the answer's JSON) of one request; an answer is taken at a status its endpoint declares, once
        it validates against that status's model (E_API otherwise); an error document is raised as its A44Error."""
        status, doc = await self._request(call, body, params)
        self._parsed(call, status, doc)
        return status, doc

    async def _answer(self, call: Call, model: type[M], *, body: Any = None) -> M:
        """The answer as its model (app/contract/models/), for the verbs that rebuild objects from it."""
        status, doc = await self._request(call, body, None)
        parsed = self._parsed(call, status, doc)
        assert isinstance(parsed, model), f"{call.method} {call.path} answers {type(parsed).__name__} at {status}"
        return parsed

    def _parsed(self, call: Call, status: int, doc: Any) -> BaseModel:
        model = call.answers[status]
        try:
            return model.model_validate(doc)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the answer"
            raise A44Error(E_API, f"{call.method} {call.path} answered something that is not a {model.__name__} "
                                  f"({where}: {first['msg']})",
                           hint=f"is {self.url} an a44 daemon of this version? (GET {self.url}{ep.OPENAPI.path} "
                                "shows what it serves)") from None

    async def _request(self, call: Call, body: Any, params: dict | None) -> tuple[int, Any]:
        import aiohttp

        session = await self._http()
        what = f"{call.method} {call.path}"
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json"} if data is not None else None
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            async with session.request(call.method, self.url + call.path, data=data, params=query,
                                       headers=headers, timeout=aiohttp.ClientTimeout(total=self._timeout)) as resp:
                text = await resp.text(encoding="utf-8", errors="replace")
                status = resp.status
        except (TimeoutError, aiohttp.ClientConnectionError, OSError) as exc:
            raise self._unavailable(exc) from None
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            doc = None
        if status in call.answers and doc is not None and not (isinstance(doc, dict) and "error" in doc):
            return status, doc
        raise self._coded(status, doc, text, what)

    async def _events(self, call: Call, after: int = 0) -> AsyncIterator[dict]:
        """Server-sent events of `call` (a GET) as dicts {id, event, data}; resumed with Last-Event-ID when the stream
        drops; ends at `event: end`."""
        import aiohttp

        session = await self._http()
        failures = 0
        last = after
        while True:
            headers = {"Accept": "text/event-stream"}
            if last:
                headers["Last-Event-ID"] = str(last)
            try:
                async with session.get(self.url + call.path, params={"follow": "true"}, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout)) as resp:
                    if resp.status != 200 or "text/event-stream" not in resp.headers.get("Content-Type", ""):
                        text = await resp.text(encoding="utf-8", errors="replace")
                        try:
                            doc = json.loads(text)
                        except ValueError:
                            doc = None
                        raise self._coded(resp.status, doc, text, f"GET {call.path}")
                    fields: dict[str, str] = {}
                    data: list[str] = []
                    async for raw in resp.content:
                        line = raw.decode("utf-8", "replace").rstrip("\r\n")
                        if line == "":
                            if not fields and not data:
                                continue
                            kind = fields.get("event", "message")
                            if kind == "end":
                                return
                            event = {"id": fields.get("id"), "event": kind,
                                     "data": json.loads("\n".join(data)) if data else None}
                            if event["id"] and event["id"].isdigit():
                                last = int(event["id"])
                            failures = 0
                            fields, data = {}, []
                            yield event
                            continue
                        if line.startswith(":"):
                            continue
                        name, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        if name == "data":
                            data.append(value)
                        else:
                            fields[name] = value
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
                failures += 1
                if failures > _STREAM_RETRIES:
                    raise self._unavailable(exc) from None
                await asyncio.sleep(reconnect_delay(failures))
                continue
            # the server closed the stream without `event: end`: resume where it stopped
            failures += 1
            if failures > _STREAM_RETRIES:
                raise A44Error(E_API, f"the event stream of {call.path} keeps ending before the run does",
                               hint="check the daemon's log")
            await asyncio.sleep(reconnect_delay(failures))

    # --- publish ---------------------------------------------------------------------------------------------
    async def publish(self, paths: list[str]):
        """Upload the YAML texts found under `paths` (as `publish` discovers them) and rebuild the PublishReport
        with the local file names; missing files are refused here exactly as the local path refuses them."""
        from ..compiler.lint import discover
        from ..diagnostics import Diagnostic, Severity, sorted_diagnostics
        from ..runtime.ingestion.triggers import StoredTrigger
        from .publishing import PublishedWorkflow, PublishReport, compile_for_publish

        paths = [str(p) for p in paths]
        code = [p for p in paths if p.endswith(".py")]
        if code:
            raise A44Error(E_REMOTE_UNSUPPORTED, f"workflows in code ({code[0]}) cannot be published through the API",
                           hint="publish them on the daemon's host, or use --local with its database")
        files, problems = discover(paths)
        if problems or not files:  # a path that is not there: the same refusal as local, nothing is sent
            result = await asyncio.to_thread(compile_for_publish, paths)
            return PublishReport(project=self.project, files=list(result.files),
                                 diagnostics=list(result.diagnostics))
        texts, back = upload_texts(files)

        def local(name):
            return back.get(name, name) if isinstance(name, str) else name

        doc = await self._answer(ep.PUBLISH.call(), rm.PublishReport, body={"files": texts})
        diagnostics = sorted_diagnostics([
            Diagnostic(d.code, Severity(d.severity), d.message, local(d.file), d.line, d.col, d.endLine, d.endCol,
                       d.hint) for d in doc.diagnostics])
        order = {f: i for i, f in enumerate(files)}
        shown = sorted((local(f) for f in doc.files), key=lambda f: order.get(f, len(order)))
        workflows = [PublishedWorkflow(w.workflow_id, w.version, w.sha256, local(w.file), w.outcome,
                                       None if w.error is None else _error(w.error.code, w.error.message,
                                                                           w.error.hint, None, w.error.step_id))
                     for w in doc.workflows]
        return PublishReport(project=doc.project, files=shown, diagnostics=diagnostics, workflows=workflows,
                             triggers=list(doc.triggers),
                             stored_triggers=[StoredTrigger(t.trigger_id, t.type, t.workflow_id, t.origin, t.outcome,
                                                            t.secret_created) for t in doc.stored_triggers])

    # --- run, wait -------------------------------------------------------------------------------------------
    async def run(self, workflow: str, input: Any = None, idempotency_key: str | None = None, *,
                  wait: bool = False, timeout: float | str | timedelta | None = None,
                  initiator: str | None = None) -> RunHandle:
        # the daemon records the calling token's name as the run's initiator (`initiator` is local only)
        require_idempotency_key(idempotency_key)
        body = {"workflow": workflow_ref(workflow), "input": {} if input is None else input,
                "idempotency_key": str(idempotency_key)}
        doc = await self._answer(ep.RUN_START.call(), rm.RunHandle, body=body)
        handle = RunHandle(doc.run_id, doc.created, doc.key_age_seconds, doc.workflow_id, doc.version)
        if not wait:
            return handle
        run, timed_out = await self.wait(handle.run_id, timeout)
        return RunHandle(handle.run_id, handle.created, handle.key_age_seconds, handle.workflow_id, handle.version,
                         run, timed_out)

    async def wait(self, run_id: str, timeout: float | str | timedelta | None = None) -> tuple[dict, bool]:
        """Until the run's event stream ends (the run is terminal): (run, False); or until `timeout`: (run as it
        stands, True)."""
        seconds = None if timeout is None else parse_duration(timeout).total_seconds()
        await self.get_run(run_id)  # E_RUN_NOT_FOUND before waiting

        async def drain():
            async for _ in self._events(ep.RUN_LOGS.at(run_id=run_id)):
                pass
        try:
            await asyncio.wait_for(drain(), seconds)
        except TimeoutError:
            return await self.get_run(run_id), True
        return await self.get_run(run_id), False

    async def get_run(self, run_id: str) -> dict:
        _, doc = await self._call(ep.RUN.at(run_id=run_id))
        return timestamps(doc)

    # --- runs, logs, follow ------------------------------------------------------------------------------------
    async def runs(self, state: str | None = None, workflow: str | None = None, step: str | None = None,
                   since: str | float | timedelta | datetime | None = None, limit: int = 50,
                   offset: int = 0) -> RunPage:
        if limit < 0 or offset < 0:
            raise InvalidArgument("limit and offset must not be negative")
        if isinstance(since, timedelta):
            since = f"{since.total_seconds()}s"
        elif isinstance(since, datetime):
            raise InvalidArgument("since as an instant is not supported against a remote daemon",
                                  hint="pass an age: 48h, 30m, 7d")
        _, doc = await self._call(ep.RUNS.call(), params={"state": state, "workflow": workflow, "step": step,
                                                          "since": since, "limit": limit, "offset": offset})
        return RunPage(int(doc["total"]), [timestamps(r) for r in doc["runs"]])

    async def logs(self, run_id: str) -> list[dict]:
        _, doc = await self._call(ep.RUN_LOGS.at(run_id=run_id))
        return [timestamps(a) for a in doc["attempts"]]

    async def query_logs(self, *, error_code: str | None = None, step: str | None = None,
                         workflow: str | None = None, partition_key: str | None = None, since=None, until=None,
                         limit: int = 100, after: str | None = None, archive: bool = False):
        from ..runtime.logs.query import LogPage

        ages = {}
        for name, value in (("since", since), ("until", until)):
            if isinstance(value, timedelta):
                value = f"{value.total_seconds()}s"
            elif isinstance(value, datetime):
                value = value.isoformat()
            ages[name] = value
        _, doc = await self._call(ep.LOGS.call(), params={
            "error_code": error_code, "step": step, "workflow": workflow, "partition_key": partition_key,
            "limit": limit, "cursor": after, "archive": "true" if archive else None, **ages})
        return LogPage([timestamps(r) for r in doc["rows"]], int(doc["limit"]), bool(doc["truncated"]), doc["next"],
                       doc["source"])

    async def follow(self, run_id: str, after_id: int = 0) -> AsyncIterator[dict]:
        async for event in self._events(ep.RUN_LOGS.at(run_id=run_id), after_id):
            if isinstance(event["data"], dict):
                yield timestamps(event["data"])

    async def resolve(self, run_id: str, step_id: str, outcome: str, *, by: str | None = None) -> dict:
        # the daemon records the calling token's name as who decided (`by` is local only)
        _, doc = await self._call(ep.RESOLVE.at(run_id=run_id), body={"step": step_id, "outcome": outcome})
        return timestamps(doc)

    async def partitions(self, target: str, *, state: str | None = None, partition: str | None = None,
                         step: str | None = None, limit: int = 1000, cursor: str | None = None) -> dict:
        _, doc = await self._call(ep.PARTITIONS.at(target=target),
                                  params={"state": state, "partition": partition, "step": step, "limit": limit,
                                          "cursor": cursor})
        return {**doc, "partitions": [timestamps(d) for d in doc["partitions"]]}

    async def skip(self, run_id: str, *, reason: str, by: str, partition: str | None = None,
                   step: str | None = None) -> dict:
        # the daemon records the calling token's name as who skipped it (`by` is local only)
        _, doc = await self._call(ep.SKIP.at(run_id=run_id),
                                  body={"partition": partition, "step": step, "reason": reason})
        return doc

    async def cancel(self, run_id: str, *, by: str, reason: str | None = None, compensate: bool = False) -> dict:
        # the daemon records the calling token's name as who cancelled it (`by` is local only)
        _, doc = await self._call(ep.CANCEL.at(run_id=run_id),
                                  body={"reason": reason, "compensate": compensate})
        return doc

    async def signal(self, run_id: str, name: str, data: Any = None, *, key: str | None = None,
                     by: str | None = None) -> dict:
        # the daemon records the calling token's name as who sent it (`by` is local only)
        _, doc = await self._call(ep.SIGNAL.at(run_id=run_id, name=name),
                                  body={"data": data, "idempotency_key": key})
        return doc

    async def run_tree(self, run_id: str) -> dict:
        _, doc = await self._call(ep.RUN_TREE.at(run_id=run_id))
        doc["runs"] = [timestamps(r) for r in doc.get("runs", [])]
        return doc

    async def approve(self, run_id: str, step: str, decision: str, *, person: str, via: str = "cli",
                      comment: str | None = None) -> dict:
        # the daemon decides for the calling token's name (`person` and `via` are local only)
        _, doc = await self._call(ep.APPROVE.at(run_id=run_id, step=step),
                                  body={"decision": decision, "comment": comment})
        return doc

    async def approvals(self, *, person: str | None = None, overdue: bool = False, limit: int = 100) -> list[dict]:
        # `person` set means --mine: the daemon reads it as the calling token's name
        params = {"mine": "true" if person else "false", "overdue": "true" if overdue else "false",
                  "limit": str(limit)}
        _, doc = await self._call(ep.APPROVALS.call(), params=params)
        return list(doc["approvals"])

    async def export(self, workflow: str, *, since: timedelta, sample: int) -> list[dict]:
        age = f"{max(1, round(since.total_seconds()))}s"      # the API's durations are whole units
        _, doc = await self._call(ep.HISTORIES.call(), params={"workflow": workflow, "since": age, "sample": sample})
        return doc["histories"]

    async def wake(self, run_id: str, step: str, *, by: str, reason: str) -> dict:
        # the daemon records the calling token's name as who woke it (`by` is local only)
        _, doc = await self._call(ep.WAKE.at(run_id=run_id), body={"step": step, "reason": reason})
        return timestamps(doc)

    async def reschedule(self, run_id: str, step: str, *, until: str, by: str, reason: str | None = None) -> dict:
        _, doc = await self._call(ep.RESCHEDULE.at(run_id=run_id),
                                  body={"step": step, "until": until, "reason": reason})
        return timestamps(doc)

    async def explain(self, run_id: str) -> dict:
        _, doc = await self._call(ep.RUN_EXPLAIN.at(run_id=run_id))
        return timestamps(doc)

    async def whoami(self) -> dict:
        _, doc = await self._call(ep.WHOAMI.call())
        return timestamps(doc)

    # --- events --------------------------------------------------------------------------------------------
    def ingestion(self) -> RemoteIngestion:
        return RemoteIngestion(self)


class RemoteIngestion(EventsService):
    """The `Ingestion` methods the CLI's `events` verbs call, over the API."""

    def __init__(self, auto: RemoteAutomation):
        self.auto = auto
        self.project = auto.project

    async def publish_event(self, type: str, data: Any, idempotency_key: str, *, partition_key: str | None = None,
                            occurred_at: str | datetime | None = None, event_id: str | None = None):
        from ..runtime.ingestion.bus import EventResult

        body = {"type": type, "data": data, "idempotency_key": idempotency_key}
        if event_id is not None:
            body["id"] = event_id
        if partition_key is not None:
            body["partition_key"] = partition_key
        if occurred_at is not None:
            body["occurred_at"] = occurred_at.isoformat() if isinstance(occurred_at, datetime) else occurred_at
        doc = await self.auto._answer(ep.EVENT_PUBLISH.call(), ev.EventResult, body=body)
        return EventResult(doc.event_id, doc.created, doc.key_age_seconds, doc.type, doc.idempotency_key,
                           list(doc.deliveries))

    async def events(self, type: str | None = None, limit: int = 50, offset: int = 0) -> list[dict]:
        _, doc = await self.auto._call(ep.EVENTS.call(), params={"type": type, "limit": limit, "offset": offset})
        return [timestamps(e) for e in doc["events"]]

    async def event(self, event_id: str) -> dict:
        _, doc = await self.auto._call(ep.EVENT.at(event_id=event_id))
        return doc
