"""Every REST route that takes a body, with each field its OpenAPI document says is required left out (and each
alternative group, `anyOf: [{required: [a]}, {required: [b]}]`, left out whole): 400 with our error document,
never a 5xx (issue 24 item 5: a skip naming neither `partition` nor `step` answered 500 E_INTERNAL)."""

from __future__ import annotations

import re

from anthares44.automation.http.openapi import ROUTES, document
from tests.ingestion.support import P

from .support import api  # noqa: F401 - the fixture


def _resolve(schema: dict, components: dict) -> dict:
    ref = schema.get("$ref")
    return components[ref.rsplit("/", 1)[1]] if ref else schema


def _sample(schema: dict, components: dict):
    """A value the schema accepts (as far as types, lengths and enums go): what the other fields hold while one is
    left out, so the missing one is the only thing wrong."""
    schema = _resolve(schema, components)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if _resolve(s, components).get("type") != "null"]
            return _sample(options[0], components)
    kind = schema.get("type")
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        return [_sample(schema["items"], components) for _ in range(schema.get("minItems", 0))]
    if kind == "object" or "properties" in schema:
        return {k: _sample(v, components) for k, v in schema.get("properties", {}).items()
                if k in schema.get("required", [])}
    return "x"


def _cases():
    """(route, body, what is missing) for every documented required field and alternative group."""
    doc = document()
    components = doc["components"]["schemas"]
    for r in ROUTES:
        if r.body is None:
            continue
        schema = components[r.body.__name__]
        required = schema.get("required", [])
        full = {k: _sample(schema["properties"][k], components) for k in required}
        for alt in schema.get("anyOf", []):
            for k in alt.get("required", []):
                full.setdefault(k, _sample(schema["properties"][k], components))
        for k in required:
            yield r, {f: v for f, v in full.items() if f != k}, k
        group = [k for alt in schema.get("anyOf", []) for k in alt.get("required", [])]
        if group:
            yield r, {f: v for f, v in full.items() if f not in group}, " or ".join(group)


def test_the_skip_alternative_is_in_the_openapi_document():
    schema = document()["components"]["schemas"]["SkipRequest"]
    assert [alt["required"] for alt in schema["anyOf"]] == [["partition"], ["step"]]


def test_every_documented_required_field_missing_is_400_never_5xx(api):
    s, doc = api("POST", "/runs", {"workflow": "wf_hooked", "input": {}, "idempotency_key": "k-req"}, as_="write")
    assert s == 202, doc
    run_id = doc["run_id"]
    ids = {"run_id": run_id, "project": P}
    cases = list(_cases())
    assert any(r.path.endswith("/skip") for r, _, _ in cases) and len(cases) >= 15, len(cases)
    wrong = []
    for route, body, missing in cases:
        path = re.sub(r"{(\w+)}", lambda m: ids.get(m.group(1), "x1"), route.path).removeprefix("/v1/automation")
        status, answer = api(route.method, path, body, as_="admin")
        code = (answer or {}).get("error", {}).get("code") if isinstance(answer, dict) else None
        if status != 400 or not (code or "").startswith("E_"):     # events: E_ENVELOPE_INVALID, dead-lettered
            wrong.append((route.method, route.path, missing, status, answer))
    assert wrong == [], wrong
    # the skip names the alternative
    s, doc = api("POST", f"/runs/{run_id}/skip", {"reason": "x"}, as_="write")
    assert s == 400 and doc["error"]["code"] == "E_PARAMS_INVALID" and "--partition" in doc["error"]["message"], doc
