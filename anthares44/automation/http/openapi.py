"""The OpenAPI 3.1 document served at `GET /v1/automation/openapi.json` and committed as schemas/openapi.json,
generated from the route table (routing.py) and the pydantic models of app/contract/models/: paths, methods, parameters
(their schemas are the rules params.py applies), bodies, answers, error answers and the security schemes.

    python -m anthares44.automation.http.openapi > schemas/openapi.json
"""

from __future__ import annotations

import re
import sys

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ..app.contract.models.common import Error
from ..jsonenc import to_json
from . import params as p
from . import routes  # noqa: F401 - declares every route
from .routing import ADMIN, APPROVE, READ, ROUTES, WRITE

_REF = "#/components/schemas/{model}"
_ERR = {"$ref": "#/components/schemas/Error"}
_SCHEMAS = {p.ident: {"type": "string", "pattern": f"^{p.ID_PATTERN.pattern}$", "maxLength": p.MAX_ID_LEN},
            p.text: {"type": "string", "minLength": 1, "maxLength": p.MAX_TEXT_LEN},
            p.count: {"type": "integer", "minimum": 0, "maximum": p.BIGINT_MAX},
            p.age: {"type": "string", "description": "an age: 250ms, 60s, 15m, 48h, 7d (at most 36500d)"},
            p.flag: {"type": "boolean"},
            p.cursor: {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "maxLength": 4 * p.MAX_ID_LEN,
                       "description": "the `next` cursor of the previous page"}}
_STATUS = {400: "bad request: a parameter (E_BAD_REQUEST) or the body (E_INVALID_ARGUMENT) is refused",
           401: "missing, unknown, expired or revoked token (E_TOKEN_INVALID)",
           403: "the token's scope, project or allowed networks refuse it (E_FORBIDDEN)",
           404: "not found", 405: "method not allowed", 408: "E_REQUEST_TIMEOUT: the body did not arrive in time",
           409: "conflict with the current state", 413: "E_BODY_TOO_LARGE", 415: "not application/json",
           422: "refused (compile errors)", 501: "not available on this server",
           503: "the database cannot be reached (E_DB_UNAVAILABLE) or the server is at its connection limit "
                "(E_SERVER_BUSY); retry"}
_SCOPE_TEXT = {READ: "automation:read (or write, approve, or admin)", WRITE: "automation:write (or admin)",
               ADMIN: "automation:admin", APPROVE: "automation:approve (or admin)"}


def _param(name: str, where: str = "query") -> dict:
    table = {"query": p.QUERY, "path": p.PATH, "header": p.HEADERS}[where]
    out = {"name": name, "in": where, "schema": _SCHEMAS[table.get(name, p.text)]}
    if where == "path":
        out["required"] = True
    return out


def _json(schema: dict | None, description: str) -> dict:
    out: dict = {"description": description}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    return out


def _components() -> tuple[dict, dict]:
    """(model -> its $ref, the schemas): requests as validated, answers as written."""
    pairs: set[tuple[type[BaseModel], JsonSchemaMode]] = {(Error, "serialization")}
    for r in ROUTES:
        if r.body is not None:
            pairs.add((r.body, "validation"))
        pairs.update((m, "serialization") for m in r.answers.values() if not isinstance(m, str))
    refs, doc = models_json_schema(sorted(pairs, key=lambda x: (x[0].__name__, x[1])), ref_template=_REF)
    return {model: ref for (model, _), ref in refs.items()}, doc.get("$defs", {})


def _operation(r, refs: dict) -> dict:
    op: dict = {"operationId": r.handler.__name__.removeprefix("api_"), "summary": r.summary, "tags": [r.tag],
                "security": [{"bearer": []}], "x-a44-scope": r.scope,
                "description": f"Scope: {_SCOPE_TEXT[r.scope]}."}
    params = [_param(n, "path") for n in re.findall(r"{(\w+)}", r.path)]
    params += [_param(n) for n in r.query] + [_param(n, "header") for n in r.headers]
    if params:
        op["parameters"] = params
    if r.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": refs[r.body]}}}
    responses = {str(status): _json(refs[m], m.__doc__.strip().splitlines()[0] if m.__doc__ else m.__name__)
                 if not isinstance(m, str) else {"description": m} for status, m in sorted(r.answers.items())}
    responses.update({str(c): _json(_ERR, _STATUS[c]) for c in r.errors})
    op["responses"] = responses
    return op


def _webhook(refs: dict) -> dict:
    run_id = {"type": "object", "required": ["run_id"], "properties": {"run_id": {"type": "string"}}}
    return {"post": {
        "operationId": "webhook", "tags": ["webhooks"],
        "summary": "signed webhook (docs/webhooks.md); the body (any JSON, at most 1 MB) becomes the run input",
        "security": [{"webhookSignature": []}],
        "parameters": [_param("project", "path"), _param("trigger", "path"),
                       {"name": "A44-Timestamp", "in": "header", "required": True, "schema": {"type": "string"}},
                       {"name": "A44-Signature", "in": "header", "required": True, "schema": {"type": "string"}},
                       {"name": "A44-Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}},
        "responses": {"202": _json(run_id, "run created"), "200": _json(run_id, "deduplicated: the original run"),
                      "401": _json(_ERR, "missing or bad signature"),
                      **{str(c): _json(_ERR, _STATUS[c]) for c in (400, 404, 405, 408, 413, 415)}}}}


def document() -> dict:
    refs, schemas = _components()
    paths: dict = {"/v1/automation/openapi.json": {"get": {
        "operationId": "openapi", "tags": ["meta"], "summary": "this document (no token)", "security": [],
        "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}}}}}
    for r in ROUTES:
        paths.setdefault(r.path, {})[r.method.lower()] = _operation(r, refs)
    paths["/v1/{project}/{trigger}"] = _webhook(refs)
    return {
        "openapi": "3.1.0",
        "info": {"title": "a44 automation", "version": "1",
                 "description": "REST API of a44 automation (docs/api.md) and signed webhooks (docs/webhooks.md). "
                                "Answers are those of the CLI's --format json; errors are "
                                "{\"error\": {code, message, hint}} (docs/errors.md)."},
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "a44_pat_... token (`a44 auth token create`); scopes automation:read "
                                          "(GET), automation:write (the rest), automation:admin (tokens, webhook "
                                          "secrets); admin implies write, write implies read. Each operation's "
                                          "x-a44-scope names the one it needs"},
                "webhookSignature": {"type": "apiKey", "in": "header", "name": "A44-Signature",
                                     "description": "hex HMAC-SHA256 of A44-Timestamp + '.' + raw body, keyed by "
                                                    "the trigger's secret"}},
            "schemas": dict(sorted(schemas.items()))},
        "paths": dict(sorted(paths.items())),
    }


def main() -> int:
    sys.stdout.write(to_json(document()) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
