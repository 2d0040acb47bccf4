"""The committed JSON Schemas (§4.3): fresh, draft-07 clean, and judging files the way an editor would.

An editor's yaml-language-server validates as draft-07; `jsonschema.Draft7Validator` stands in for it here,
an implementation independent of the generator (which only uses pydantic).
"""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from anthares44.automation.cli import cmd_schema
from anthares44.automation.cli.main import main
from anthares44.automation.compiler import jsonschema as gen
from anthares44.automation.compiler.lint import TEST_FILE_SUFFIX
from anthares44.automation.compiler.models import BUILTIN_PARAMS

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
EXAMPLES = ROOT / "examples"
REGENERATE = "a44 automation schema --write schemas/"

# 2020-12-only keywords (and pydantic's OpenAPI `discriminator`) that yaml-language-server ignores.
NOT_DRAFT_07 = {"$defs", "prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired",
                "dependentSchemas", "$dynamicRef", "$anchor", "discriminator"}

from tests.seed_texts import SEED_CONNECTOR, SEED_EVENT_TRIGGER, SEED_SCHEDULE_TRIGGER, SEED_WORKFLOW  # noqa: E402

QUEUE = """\
id: q_invoice_settle
maxConcurrency: 25
ordering: by-partition
maxAttempts: 8
"""

SEEDS = [("workflow", SEED_WORKFLOW), ("triggers", SEED_EVENT_TRIGGER), ("triggers", SEED_SCHEDULE_TRIGGER),
         ("connectors", SEED_CONNECTOR), ("queues", QUEUE)]
EXAMPLE_DIRS = {"workflows": "workflow", "triggers": "triggers", "connectors": "connectors", "queues": "queues"}


def load(text: str):
    return YAML(typ="safe").load(text)


def committed(kind: str) -> dict:
    return json.loads((SCHEMAS / gen.file_name(kind)).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft7Validator]:
    return {kind: jsonschema.Draft7Validator(committed(kind)) for kind in gen.KINDS}


def messages(validator: jsonschema.Draft7Validator, data) -> list[str]:
    """Every error message, including those inside anyOf/if-then contexts, as an editor would surface them."""
    out, todo = [], list(validator.iter_errors(data))
    while todo:
        err = todo.pop()
        out.append(err.message)
        todo.extend(err.context or [])
    return out


def nodes(schema, *, skip_conditions: bool = False):
    """Every schema object, walking only draft-07 keyword positions (a step field named `if` is not a keyword).
    With skip_conditions the `if` subschemas (dispatch conditions, not fields) are left out."""
    if not isinstance(schema, dict):
        return
    yield schema
    for key in ("properties", "definitions", "patternProperties"):
        for sub in (schema.get(key) or {}).values():
            yield from nodes(sub, skip_conditions=skip_conditions)
    for key in ("items", "additionalProperties", "not", "then", "else", "contains", "propertyNames") + (
            () if skip_conditions else ("if",)):
        yield from nodes(schema.get(key), skip_conditions=skip_conditions)
    for key in ("anyOf", "allOf", "oneOf"):
        for sub in schema.get(key) or []:
            yield from nodes(sub, skip_conditions=skip_conditions)


# ---- (a) the committed files are the generator's output ------------------------------------------------------


@pytest.mark.parametrize("kind", gen.KINDS)
def test_committed_schema_is_fresh(kind):
    path = SCHEMAS / gen.file_name(kind)
    assert path.is_file(), f"{path} is missing; run `{REGENERATE}`"
    assert path.read_text(encoding="utf-8") == gen.render(gen.generate(kind)), \
        f"{path} is stale (the models changed); run `{REGENERATE}` and commit the result"


def test_generation_is_deterministic():
    assert gen.render(gen.generate("any")) == gen.render(gen.generate("any"))
    assert gen.render(gen.generate("queues")).endswith("}\n")


def test_cli_prints_writes_and_checks(tmp_path, capsys):
    assert cmd_schema.KINDS == gen.KINDS
    assert main(["automation", "schema", "--kind", "triggers"]) == 0
    assert capsys.readouterr().out == gen.render(gen.generate("triggers"))
    assert main(["automation", "schema", "--write", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(gen.file_name(k) for k in gen.KINDS)
    assert main(["automation", "schema", "--check", str(tmp_path)]) == 0
    (tmp_path / "queues.schema.json").write_text("{}\n", encoding="utf-8")
    assert main(["automation", "schema", "--check", str(tmp_path)]) == 1
    assert "queues.schema.json: missing or stale" in capsys.readouterr().err


def test_cli_rejects_unknown_kind():
    with pytest.raises(SystemExit) as exc, redirect_stdout(io.StringIO()):
        main(["automation", "schema", "--kind", "workflows"])
    assert exc.value.code == 2


# ---- (b) draft-07 only ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", gen.KINDS)
def test_schema_is_valid_draft07(kind):
    schema = committed(kind)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["title"] and schema["description"]
    jsonschema.Draft7Validator.check_schema(schema)
    for node in nodes(schema):
        assert not NOT_DRAFT_07 & set(node), f"{kind}: keyword unknown to draft-07: {NOT_DRAFT_07 & set(node)}"
        ref = node.get("$ref")
        if ref is not None:
            assert ref.startswith("#/definitions/"), ref
            assert ref.split("/")[-1] in schema["definitions"], f"dangling {ref}"
    assert "$defs" not in json.dumps(schema)


def test_generator_refuses_to_emit_non_draft07():
    with pytest.raises(ValueError, match="prefixItems"):
        gen.check_draft07({"type": "array", "prefixItems": [{"type": "string"}]})
    with pytest.raises(ValueError, match="siblings"):
        gen.check_draft07({"properties": {"a": {"$ref": "#/definitions/A", "description": "lost in draft-07"}}})


# ---- (c) valid files validate -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,text", SEEDS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(SEEDS)])
def test_seed_files_validate(validators, kind, text):
    data = load(text)
    assert messages(validators[kind], data) == []
    assert messages(validators["any"], data) == []


def example_files():
    if not EXAMPLES.is_dir():
        return []
    # the test kit's declarative tests are not a44 documents: lint skips them, and so does this
    return sorted(p for p in EXAMPLES.rglob("*.y*ml")
                  if p.suffix in (".yaml", ".yml") and "plugins" not in p.relative_to(EXAMPLES).parts
                  and not p.name.endswith(TEST_FILE_SUFFIX))


@pytest.mark.parametrize("path", example_files(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_files_validate(validators, path):
    data = load(path.read_text(encoding="utf-8"))
    kind = EXAMPLE_DIRS.get(path.relative_to(EXAMPLES).parts[0])
    if kind:
        assert messages(validators[kind], data) == [], f"{path} against {kind}.schema.json"
    assert messages(validators["any"], data) == [], f"{path} against any.schema.json"


def test_each_builtin_uses_accepts_its_own_parameters(validators):
    steps = [
        {"id": "a", "uses": "pass", "timeout": "1s", "output": {"x": "{{ input.x }}"}},
        {"id": "b", "uses": "http", "timeout": "10s", "method": "POST", "url": "https://x", "body": {"a": 1}},
        {"id": "c", "uses": "vpn/http", "timeout": "10s", "network": "vpn_a", "path": "/x"},
        {"id": "d", "uses": "sql/execute", "timeout": "5s", "query": "select $1", "params": [1]},
        {"id": "e", "uses": "storage/put", "timeout": "5s", "key": "k", "body": "v"},
        {"id": "f", "uses": "storage/get", "timeout": "5s", "key": "k"},
        {"id": "g", "uses": "queue/publish", "timeout": "5s", "type": "a.b", "data": {}},
        {"id": "h", "uses": "bot/invoke", "timeout": "30s", "prompt": "p", "schema": {"severity": "p1|p2"}},
        {"id": "i", "uses": "connector/payments.authorize", "timeout": "5s", "with": {"amount": 1}},
        {"id": "j", "uses": "con_erp_private", "timeout": "5s", "method": "GET", "path": "/x"},
        {"id": "k", "uses": "con_warehouse", "timeout": "5s", "query": "select 1"},  # a declared sql connector
        {"id": "l", "sleep": "30s", "needs": ["a"]},
        {"id": "m", "uses": "http", "timeout": "5s", "url": "https://x",
         "compensate": {"uses": "sql/execute", "timeout": "5s", "query": "delete from t where id = $1"}},
    ]
    assert {s["uses"] for s in steps if "uses" in s} >= set(BUILTIN_PARAMS)
    assert messages(validators["workflow"], {"name": "w", "version": 1, "steps": steps}) == []


# ---- (d) invalid files are rejected as an editor would reject them --------------------------------------------

REJECTED = [
    # (kind, base document, mutation, message expected among the errors)
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].update(timeot=d["steps"][1].pop("timeout")),
     "'timeot' was unexpected"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][0].pop("timeout"), "'timeout' is a required property"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].update(timeout=None), "None is not of type 'string'"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].update(url="https://x"), "'url' was unexpected"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].update(**{"with": {"query": "x"}}), "'with' was unexpected"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][0].update(query="select 1"), "'query' was unexpected"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].pop("query"), "'query' is a required property"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].update(uses="sql/exec"), "'sql/exec' is not one of"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][1].update(timeout="5"), "does not match"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"].append({"id": "cool", "sleep": "30s", "timeout": "5s"}),
     "'timeout' was unexpected"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"].append({"id": "nothing", "timeout": "5s"}),
     "'uses' is a required property"),
    ("workflow", SEED_WORKFLOW, lambda d: d["steps"][0].update(compensate={"uses": "http", "qurey": 1}),
     "'qurey' was unexpected"),
    ("workflow", SEED_WORKFLOW, lambda d: d.pop("version"), "'version' is a required property"),
    ("workflow", SEED_WORKFLOW, lambda d: d.update(verison=4), "'verison' was unexpected"),
    ("triggers", SEED_SCHEDULE_TRIGGER, lambda d: d[0].update(dstPolicy="skip"), "'skip' is not one of"),
    ("triggers", SEED_SCHEDULE_TRIGGER, lambda d: d[0].pop("tz"), "'tz' is a required property"),
    ("triggers", SEED_EVENT_TRIGGER, lambda d: d[0].update(type="events"), "'events' is not one of"),
    ("triggers", SEED_EVENT_TRIGGER, lambda d: d[0]["deliver"].update(maxAge=6), "6 is not of type 'string'"),
    ("connectors", SEED_CONNECTOR, lambda d: d[0].update(baseURL="https://x"), "'baseURL' was unexpected"),
    ("connectors", SEED_CONNECTOR, lambda d: d[0]["auth"].update(kind="basic"), "'basic' is not one of"),
    ("queues", QUEUE, lambda d: d.update(maxConcurency=d.pop("maxConcurrency")), "'maxConcurency' was unexpected"),
    ("queues", QUEUE, lambda d: d.update(ordering="fifo"), "'fifo' is not one of"),
]


@pytest.mark.parametrize("kind,text,mutate,expected", REJECTED, ids=[r[3] for r in REJECTED])
def test_invalid_files_are_rejected(validators, kind, text, mutate, expected):
    data = load(text)
    assert messages(validators[kind], data) == []  # the base is valid: the mutation alone is rejected
    bad = copy.deepcopy(data)
    mutate(bad)
    for schema_kind in (kind, "any"):
        found = messages(validators[schema_kind], bad)
        assert found, f"{schema_kind}.schema.json accepted {bad}"
        assert any(expected in m for m in found), f"{schema_kind}: {expected!r} not among {found}"


# ---- (e) help text where editors read it ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", gen.KINDS)
def test_fields_carry_help_outside_refs(kind):
    schema = committed(kind)
    defs = schema["definitions"]
    checked = 0
    for node in nodes(schema, skip_conditions=True):
        assert not ("$ref" in node and len(node) > 1), f"draft-07 ignores these siblings of $ref: {node}"
        if node.get("description") is not None:
            assert node.get("markdownDescription") == node["description"]
        for name, prop in (node.get("properties") or {}).items():
            target = defs[prop["$ref"].split("/")[-1]] if "$ref" in prop else prop
            assert target.get("description"), f"{kind}: field {name!r} has no description"
            assert target.get("markdownDescription") == target["description"], name
            checked += 1
    assert checked >= (4 if kind == "approvers" else 5)  # the walk really reached the fields


def test_uses_offers_builtin_names_for_completion():
    name = committed("workflow")["definitions"]["ConnectorName"]
    enums = [option.get("enum") for option in name["anyOf"] if "enum" in option]
    assert enums == [list(BUILTIN_PARAMS)]


def test_duration_defaults_are_written_as_users_write_them():
    breaker = committed("connectors")["definitions"]["CircuitBreaker"]["properties"]
    # the models keep milliseconds (60000); an editor inserting that would write a duration without a unit
    assert breaker["window"]["default"] == "1m" and breaker["openFor"]["default"] == "30s"
    validator = jsonschema.Draft7Validator(breaker["window"])
    assert validator.is_valid(breaker["window"]["default"])


def test_any_schema_tells_every_kind_lint_knows():
    from anthares44.automation.compiler.documents import KINDS

    assert set(gen._KIND_DEFINITIONS) == set(KINDS)
    # the kind's own error, not the union's: a connector typo is not judged as a trigger
    bad = load(SEED_CONNECTOR)
    bad[0]["netwrok"] = bad[0].pop("network")
    top = [e.message for e in jsonschema.Draft7Validator(committed("any")).iter_errors(bad)]
    assert any("'netwrok' was unexpected" in m for m in top), top
