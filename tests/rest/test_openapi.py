"""openapi.json is generated from the route table and the pydantic models: the committed copy is up to date, it is
a valid OpenAPI 3.1 document, every registered REST route is in it and every path in it is served, each operation
has its body schema, its error answers and its scope."""

from __future__ import annotations

import json
import re
from pathlib import Path

from openapi_spec_validator import validate

from anthares44.automation.http import build_app
from anthares44.automation.http.openapi import ROUTES, document

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGENERATE = "python -m anthares44.automation.http.openapi > docs/openapi.json"


def _served() -> set[tuple[str, str]]:
    app = build_app(store=None)
    out = set()
    for resource in app.router.resources():
        path = resource.canonical
        if not path.startswith("/v1/"):
            continue
        for r in resource:
            if r.method not in ("HEAD", "OPTIONS"):
                out.add((path, r.method.lower()))
    return out


def test_the_committed_document_is_the_generated_one():
    generated = document()
    assert json.loads(COMMITTED.read_text()) == json.loads(json.dumps(generated)), f"regenerate: {REGENERATE}"


def test_it_is_a_valid_openapi_3_1_document():
    validate(document())


def test_every_route_is_documented_and_every_documented_path_is_served():
    doc = document()
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    served = _served()
    assert ("/v1/{project}/{trigger}", "*") in served      # any method: a wrong one is the webhook's own 405
    served = {(p, "post" if m == "*" else m) for p, m in served}
    assert served - documented == set(), "routes missing from openapi.json"
    assert documented - served == set(), "openapi.json paths nobody serves"
    assert len(served) > 40


def test_each_operation_has_its_schemas_errors_and_scope():
    doc = document()
    schemas = doc["components"]["schemas"]
    for r in ROUTES:
        op = doc["paths"][r.path][r.method.lower()]
        assert op["x-a44-scope"] == r.scope and op["security"] == [{"bearer": []}]
        assert {"400", "401", "403"} <= set(op["responses"]), r.path
        assert all(op["responses"][s]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
                   for s in op["responses"] if s[0] in "45" and s != "422")
        if r.body is not None:
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            body = schemas[ref.rsplit("/", 1)[1]]
            assert body["additionalProperties"] is False and body["properties"], r.path
        for name in re.findall(r"{(\w+)}", r.path):
            assert any(p["name"] == name and p["in"] == "path" for p in op["parameters"]), (r.path, name)
    # bodies are real schemas now, not the empty objects of the hand-written document
    assert schemas["ReplayRequest"]["properties"]["dry_run"]["type"] == "boolean"
    assert schemas["RedriveRequest"]["properties"]["max"]["anyOf"][0]["minimum"] == 0
    assert doc["paths"]["/v1/automation/tokens"]["get"]["x-a44-scope"] == "automation:admin"
