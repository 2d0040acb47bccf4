"""JSON Schemas of the YAML file kinds (§4.3), generated from the models for editors.

The models are the source: pydantic's `models_json_schema(by_alias=True)` gives the fields, types, defaults and
attribute docstrings. This module reshapes that output for yaml-language-server (VS Code, Neovim, JetBrains),
which validates best as draft-07 and ignores pydantic's `discriminator`:

- draft-07 throughout: `definitions` instead of `$defs`, no 2020-12-only keywords, no `discriminator`;
- help text where draft-07 reads it: a `$ref` with siblings has them ignored, so such nodes become
  `{allOf: [{$ref}], description: ...}`; every `description` gets a `markdownDescription` twin for VS Code;
- steps dispatch on `uses` with draft-07 `if`/`then`: each branch is a closed object holding the common step
  fields plus that connector's own parameters, so completion offers the right keys per `uses` and a key that
  belongs to no branch (a typo, `url:` on `sql/execute`) is flagged; `timeout` is required outside sleep steps.
  The step object lists no `properties` of its own (editors would offer them next to the branch's): every key
  is offered only until `uses` or `sleep` decides the branch;
- triggers dispatch on `type` the same way.

Output is deterministic (sorted keys, two-space indent, trailing newline) so a test can compare the committed
files under `schemas/` byte for byte with a fresh generation.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..durations import DURATION_PATTERN
from .documents import SHAPES, Clue
from .models import BUILTIN_PARAMS, CHANNEL_MODELS, TRIGGER_MODELS, AlertRule, ConnectorDecl, Queue, Workflow
from .models.approvals import ApproverGroup
from .models.connectors import DECLARABLE_TYPES
from .models.types import format_duration

if TYPE_CHECKING:
    from pydantic import BaseModel

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
KINDS = ("workflow", "triggers", "connectors", "queues", "alerts", "channels", "approvers", "any")
REF = "#/definitions/"
PLUGIN_PATTERN = r"^connector/\S+$"
DECLARED_PATTERN = r"^con_[A-Za-z0-9_.-]+$"
CHILD_PATTERN = r"^workflow/[a-z][a-z0-9-]{0,62}$"     # a child-workflow step (§21, docs/children.md)
NOT_ON_CHILD = ("retry", "exclusive", "rows", "expect", "partitions", "onPartitionFailure")

# Keywords a draft-07 validator does not know (or pydantic-only ones): any of them in the output is a bug.
FORBIDDEN_KEYWORDS = frozenset({
    "$defs", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary",
    "prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas",
    "minContains", "maxContains", "discriminator",
})

# The definition judging each file kind (documents.KINDS).
_KIND_DEFINITIONS = {"workflow": "Workflow", "trigger": "Trigger", "connector": "ConnectorDecl", "queue": "Queue",
                     "alert": "AlertRule", "channel": "Channel", "approvers": "ApproverGroup"}

# Step fields by step form; the rest of a step's keys are its connector's parameters (§3.7).
STEP_COMMON = ("id", "uses", "timeout", "retry", "compensate", "if", "needs", "exclusive", "rows", "expect",
               "description", "partitions", "onPartitionFailure")
SLEEP_FIELDS = ("id", "sleep", "description", "if", "needs")
WAIT_FIELDS = ("id", "wait", "description", "if", "needs")
APPROVAL_FIELDS = ("id", "approval", "description", "if", "needs")
COMPENSATION_COMMON = ("uses", "timeout")

_TITLES = {
    "workflow": "a44 automation workflow",
    "triggers": "a44 automation triggers",
    "connectors": "a44 automation connectors",
    "queues": "a44 automation queues",
    "alerts": "a44 alert rules",
    "channels": "a44 notification channels",
    "approvers": "a44 approver groups",
    "any": "a44 automation file (any kind)",
}
_DESCRIPTIONS = {
    "workflow": "A workflow file (§3): name, version, triggers, concurrency and steps.",
    "triggers": "A triggers file (§8.3, §11): a list of trigger objects (or one), discriminated by `type`.",
    "connectors": "A connectors file (§14): a list of declared connector instances (or one).",
    "queues": "A queues file (§10.1): one queue (or a list of them).",
    "alerts": "An alert rules file (§16, docs/alerts.md): one `kind: alert` rule (or a list of them).",
    "channels": "A notification channels file (docs/alerts.md): one `kind: channel` (or a list of them), by `type`.",
    "approvers": "An approver groups file (§20, docs/approvals.md): one `kind: approvers` group (or a list of them).",
    "any": "Any a44 automation file: a workflow, triggers, connectors, queues, alert rules, channels or approver "
           "groups.",
}


# ---------------------------------------------------------------------------------------------------- public


def file_name(kind: str) -> str:
    return f"{kind}.schema.json"


def generate(kind: str) -> dict[str, Any]:
    """The draft-07 schema of one file kind (`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown schema kind {kind!r}; expected one of: {', '.join(KINDS)}")
    definitions = _definitions()
    body = _file_bodies()[kind]
    schema = {"$schema": DRAFT_07, "title": _TITLES[kind], "description": _DESCRIPTIONS[kind], **body}
    _polish(schema)
    schema["definitions"] = {name: definitions[name] for name in sorted(_reachable(body, definitions))}
    check_draft07(schema)
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_all(directory: str | Path) -> list[Path]:
    """Write every kind's schema into `directory`; returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in KINDS:
        path = out / file_name(kind)
        path.write_text(render(generate(kind)), encoding="utf-8", newline="\n")
        written.append(path)
    return written


def stale_files(directory: str | Path) -> list[Path]:
    """Schema files under `directory` that are missing or differ from a fresh generation."""
    out = Path(directory)
    stale = []
    for kind in KINDS:
        path = out / file_name(kind)
        if not path.is_file() or path.read_text(encoding="utf-8") != render(generate(kind)):
            stale.append(path)
    return stale


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object inside `schema` (itself included), by draft-07 keyword position, so that a property
    named like a keyword (a step's `if`) is never mistaken for one."""
    if not isinstance(schema, dict):
        return
    yield schema
    for key in ("properties", "patternProperties", "definitions", "$defs"):
        for sub in (schema.get(key) or {}).values():
            yield from subschemas(sub)
    for key in ("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then",
                "else"):
        yield from subschemas(schema.get(key))
    items = schema.get("items")
    for sub in items if isinstance(items, list) else [items]:
        yield from subschemas(sub)
    for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
        for sub in schema.get(key) or []:
            yield from subschemas(sub)
    for sub in (schema.get("dependencies") or {}).values():
        yield from subschemas(sub)


def check_draft07(schema: dict[str, Any]) -> None:
    """Raise if the schema uses a keyword outside draft-07 or a `$ref` whose siblings draft-07 would ignore."""
    for node in subschemas(schema):
        bad = FORBIDDEN_KEYWORDS.intersection(node)
        if bad:
            raise ValueError(f"schema uses keywords a draft-07 editor ignores: {sorted(bad)}")
        if "$ref" in node and len(node) > 1:
            raise ValueError(f"$ref with siblings draft-07 ignores: {sorted(node)}")


# ------------------------------------------------------------------------------------------- definitions


def _definitions() -> dict[str, dict[str, Any]]:
    """Every definition the file kinds need: pydantic's, polished, plus the hand-shaped dispatchers."""
    from pydantic.json_schema import models_json_schema

    models: list[type[BaseModel]] = [Workflow, ConnectorDecl, Queue, AlertRule, ApproverGroup, *CHANNEL_MODELS.values(),
                                     *TRIGGER_MODELS.values(), *dict.fromkeys(BUILTIN_PARAMS.values())]
    _, top = models_json_schema([(m, "validation") for m in models], by_alias=True, ref_template=REF + "{model}")
    defs: dict[str, dict[str, Any]] = top["$defs"]
    from .models.docstrings import all_models, field_docs

    for name, model in all_models(models).items():
        props = defs.get(name, {}).get("properties", {})
        for key, doc in field_docs(model).items():
            if key in props:
                props[key]["description"] = doc
    for schema in defs.values():
        _polish(schema)
    for typ, model in TRIGGER_MODELS.items():
        # the `type` literal has no docstring of its own: the trigger class says what that kind does
        prop = defs[model.__name__]["properties"]["type"]
        _describe(prop, f"`{typ}`: {defs[model.__name__].get('description', '')}".strip())
    defs["ConnectorName"] = _connector_name_schema()
    defs["Step"] = _step_schema(defs)
    defs["Compensation"] = _compensation_schema(defs)
    defs["Trigger"] = _trigger_schema(defs)
    defs["Channel"] = {"anyOf": [{"$ref": REF + m.__name__} for m in CHANNEL_MODELS.values()]}
    _describe(defs["Channel"], "A notification channel, by `type`.")
    defs["AnyObject"] = _by_shape(in_list=False)
    defs["AnyEntry"] = _by_shape(in_list=True)
    return defs


def _file_bodies() -> dict[str, dict[str, Any]]:
    def one_or_list(name: str) -> list[dict[str, Any]]:
        return [{"$ref": REF + name}, {"type": "array", "minItems": 1, "items": {"$ref": REF + name}}]

    bodies: dict[str, dict[str, Any]] = {
        "workflow": {"allOf": [{"$ref": REF + "Workflow"}]},
        "triggers": {"anyOf": one_or_list("Trigger")},
        "connectors": {"anyOf": one_or_list("ConnectorDecl")},
        "queues": {"anyOf": one_or_list("Queue")},
        "alerts": {"anyOf": one_or_list("AlertRule")},
        "channels": {"anyOf": one_or_list("Channel")},
        "approvers": {"anyOf": one_or_list("ApproverGroup")},
    }
    bodies["any"] = {"if": {"type": "array"},
                     "then": {"type": "array", "minItems": 1, "items": {"$ref": REF + "AnyEntry"}},
                     "else": {"$ref": REF + "AnyObject"}}
    return bodies


def _by_shape(in_list: bool) -> dict[str, Any]:
    """One object of any kind, judged by the schema of the kind its shape tells (`documents.SHAPES`, as lint
    does): a typo in a queue gets the queue's error, not the union's best guess. `if`/`then`/`else` chain,
    an explicit `kind:` first; an object no sign identifies is judged by the union of the kinds."""
    targets: dict[str, dict[str, Any]] = {kind: {"$ref": REF + name} for kind, name in _KIND_DEFINITIONS.items()}
    if in_list:
        targets["workflow"] = {"not": {}}
        _describe(targets["workflow"], "A workflow is alone in its file: remove the leading `-`.")
    node: dict[str, Any] = {"anyOf": [target for kind, target in targets.items() if kind != "workflow" or not in_list]}
    rules: list[tuple[dict[str, Any], str]] = [({"required": ["kind"], "properties": {"kind": {"const": kind}}}, kind) for kind in _KIND_DEFINITIONS]
    rules += [({"anyOf": [_clue_schema(clue) for clue in clues]}, kind) for kind, clues in SHAPES]
    for condition, kind in reversed(rules):
        node = {"if": condition, "then": targets[kind], "else": node}
    return node


def _clue_schema(clue: Clue) -> dict[str, Any]:
    schema: dict[str, Any] = {"required": [*clue.keys, *([clue.field] if clue.field else [])]}
    if clue.field:
        value = {"enum": list(clue.one_of)} if clue.one_of else {"pattern": "^" + re.escape(clue.prefix or "")}
        schema["properties"] = {clue.field: {"type": "string", **value}}
    return schema


def _reachable(body: dict[str, Any], defs: dict[str, dict[str, Any]]) -> set[str]:
    seen: set[str] = set()
    todo = [body]
    while todo:
        for node in subschemas(todo.pop()):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(REF) and ref[len(REF):] not in seen:
                seen.add(ref[len(REF):])
                todo.append(defs[ref[len(REF):]])
    return seen


# ------------------------------------------------------------------------------------------ steps / uses


def _uses_schema(description: str) -> dict[str, Any]:
    """`uses`: the built-in names as an enum (so editors complete them), or a plugin, or a declared id."""
    schema = {"allOf": [{"$ref": REF + "ConnectorName"}]}
    _describe(schema, description)
    return schema


def _connector_name_schema() -> dict[str, Any]:
    schema = {"title": "connector", "anyOf": [
        {"type": "string", "enum": list(BUILTIN_PARAMS)},
        {"type": "string", "pattern": PLUGIN_PATTERN, "description": "A connector plugin (Python entry point), "
                                                                      "e.g. `connector/payments.authorize`."},
        {"type": "string", "pattern": DECLARED_PATTERN, "description": "A declared connector id, e.g. "
                                                                        "`con_erp_private`."},
        {"type": "string", "pattern": CHILD_PATTERN, "description": "A child workflow, e.g. "
                                                                     "`workflow/tenant-onboard` (§21)."},
    ]}  # the enum is what editors offer as completion; the patterns only accept
    _polish(schema)
    _describe(schema, "A connector: a built-in (" + ", ".join(f"`{n}`" for n in BUILTIN_PARAMS) + "), a plugin "
                      "(`connector/<name>`) or a declared connector id (`con_...`).")
    return schema


def _uses_forms() -> list[tuple[str, dict[str, Any]]]:
    """(form, condition on `uses`) for each way a step names its connector."""
    forms = [(name, {"const": name}) for name in BUILTIN_PARAMS]
    forms.append(("plugin", {"type": "string", "pattern": PLUGIN_PATTERN}))
    forms.append(("declared", {"type": "string", "pattern": DECLARED_PATTERN}))
    forms.append(("child", {"type": "string", "pattern": CHILD_PATTERN}))
    return forms


def _params(defs: dict[str, dict[str, Any]], uses: str) -> tuple[dict[str, Any], list[str]]:
    """A built-in's parameters as `{field: {$ref}}` (each stored once) and its required fields."""
    name = BUILTIN_PARAMS[uses].__name__
    model = defs[name]
    return _shared_fields(defs, name, copy.deepcopy(model.get("properties", {}))), list(model.get("required", []))


def _closed(props: dict[str, Any], required: list[str], description: str | None = None) -> dict[str, Any]:
    schema = {"type": "object", "properties": props, "required": sorted(set(required)),
              "additionalProperties": False}
    if description:
        _describe(schema, description)
    return schema


def _merge(common: dict[str, Any], params: dict[str, Any], where: str) -> dict[str, Any]:
    clash = set(common) & set(params)
    if clash:  # a parameter shadowing a step field would make the step ambiguous: fix the params model
        raise ValueError(f"connector parameters {sorted(clash)} of {where} clash with step fields")
    return {**copy.deepcopy(common), **params}


def _branches(defs: dict[str, dict[str, Any]], common: dict[str, Any], required: list[str],
              plugin_extra: dict[str, Any]) -> list[dict[str, Any]]:
    """One `if uses matches -> then closed object` per uses form."""
    out = []
    for form, condition in _uses_forms():
        if form == "plugin":
            then = _closed(_merge(common, plugin_extra, form), required,
                           "A connector plugin: its parameters go under `with:`.")
        elif form == "child":
            props = {k: v for k, v in common.items() if k not in NOT_ON_CHILD}
            extra: dict[str, tuple[dict[str, Any], str]] = {
                "input": ({"type": "object"}, "The child's input; templates rendered when the step starts."),
                "childOnTimeout": ({"enum": ["cancel", "keep"]}, "At the step's timeout: cancel the child "
                                   "(default) or let it run on."),
                "onParentCancel": ({"enum": ["cancel", "abandon"]}, "When the parent is cancelled: cancel the "
                                   "child (default) or let it run on.")}
            props["wait"] = {"$ref": REF + "Step_wait"}
            for name, (field, help) in extra.items():
                _describe(field, help)
                props[name] = field
            then = _closed(props, required, "A child workflow (§21): started once, its result the step's output.")
        elif form == "declared":
            # the declared connector's type is in another file: accept the parameters of any declarable type
            options = []
            for typ in dict.fromkeys(("vpn/http", *DECLARABLE_TYPES)):
                props, req = _params(defs, typ)
                options.append(_closed(_merge(common, props, typ), required + req,
                                       f"A declared connector of type `{typ}`."))
            then = {"anyOf": options}
        else:
            props, req = _params(defs, form)
            then = _closed(_merge(common, props, form), required + req,
                           defs[BUILTIN_PARAMS[form].__name__].get("description"))
        out.append({"if": {"properties": {"uses": condition}, "required": ["uses"]}, "then": then})
    return out


def _shared_fields(defs: dict[str, dict[str, Any]], owner: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Store each field schema once as `definitions/<owner>_<field>` (help text inside the definition, where
    draft-07 reads it) and return `{field: {$ref}}` for the dispatch branches, which repeat them per `uses`."""
    refs = {}
    for name, schema in fields.items():
        defs[f"{owner}_{name}"] = schema
        refs[name] = {"$ref": f"{REF}{owner}_{name}"}
    return refs


def _undecided(refs: dict[str, Any], deciders: list[str]) -> dict[str, Any]:
    """Every key, offered only while none of `deciders` is written. Editors complete the keys of each schema
    that applies; were these the object's own `properties`, a step with `uses: http` would still be offered
    `sleep:` and `with:`, which its branch then rejects (and hover would show a field's help twice)."""
    return {"if": {"not": {"anyOf": [{"required": [key]} for key in deciders]}},
            "then": {"properties": refs}}


def _unknown_uses(refs: dict[str, Any]) -> dict[str, Any]:
    """A `uses` no branch takes (`sql/exec`) is judged as a connector name, so the error says what it may be."""
    return {"if": {"required": ["uses"], "not": {"properties": {"uses": {"anyOf": [c for _, c in _uses_forms()]}}}},
            "then": {"properties": {"uses": refs["uses"]}}}


def _step_schema(defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    fields = copy.deepcopy(defs["Step"]["properties"])
    fields["uses"] = _uses_schema(fields["uses"]["description"])
    comp = fields["compensate"]
    comp["anyOf"] = [_uses_schema("A connector called with no parameters."), {"$ref": REF + "Compensation"}]
    # `timeout: null` would mean "no timeout" (refused outside sleep steps) and `sleep: null` no sleep at all
    fields["timeout"] = _non_null(fields["timeout"])
    fields["sleep"] = _non_null(fields["sleep"])
    fields["wait"] = _non_null(fields["wait"])
    fields["approval"] = _non_null(fields["approval"])
    refs = _shared_fields(defs, "Step", {name: fields[name] for name in (*STEP_COMMON, "sleep", "wait", "approval",
                                                                         "with")})
    common = {name: refs[name] for name in STEP_COMMON}
    sleep_branch = {
        "if": {"required": ["sleep"], "not": {"required": ["uses"]}},
        "then": _closed({name: refs[name] for name in SLEEP_FIELDS}, ["id", "sleep"],
                        "A durable wait: takes no `uses`, `timeout` or `retry` (§3.5b)."),
    }
    wait_branch = {
        "if": {"required": ["wait"], "not": {"anyOf": [{"required": ["uses"]}, {"required": ["sleep"]}]}},
        "then": _closed({name: refs[name] for name in WAIT_FIELDS}, ["id", "wait"],
                        "A durable wait for a signal: takes no `uses`, `timeout` or `retry` (§20)."),
    }
    approval_branch = {
        "if": {"required": ["approval"],
               "not": {"anyOf": [{"required": ["uses"]}, {"required": ["sleep"]}, {"required": ["wait"]}]}},
        "then": _closed({name: refs[name] for name in APPROVAL_FIELDS}, ["id", "approval"],
                        "A person's decision: takes no `uses`, `timeout` or `retry` (§20, docs/approvals.md)."),
    }
    schema = {
        "title": "Step",
        "type": "object",
        "required": ["id"],
        "anyOf": [{"required": ["uses"]}, {"required": ["sleep"]}, {"required": ["wait"]}, {"required": ["approval"]}],
        "allOf": [_undecided(refs, ["uses", "sleep", "wait", "approval"]), _unknown_uses(refs), sleep_branch, wait_branch,
                  approval_branch,
                  *_branches(defs, common, ["id", "uses", "timeout"], {"with": refs["with"]})],
    }
    _describe(schema, defs["Step"]["description"] + " Connector parameters sit on the step (built-ins, declared "
                      "connectors) or under `with:` (plugins).")
    return schema


def _compensation_schema(defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    fields = copy.deepcopy(defs["Compensation"]["properties"])
    fields["uses"] = _uses_schema(fields["uses"]["description"])
    refs = _shared_fields(defs, "Compensation", {name: fields[name] for name in (*COMPENSATION_COMMON, "with")})
    common = {name: refs[name] for name in COMPENSATION_COMMON}
    schema = {
        "title": "Compensation",
        "type": "object",
        "required": ["uses"],
        "allOf": [_undecided(refs, ["uses"]), _unknown_uses(refs),
                  *_branches(defs, common, ["uses"], {"with": refs["with"]})],
    }
    _describe(schema, defs["Compensation"]["description"])
    return schema


def _trigger_schema(defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    base = defs[next(iter(TRIGGER_MODELS.values())).__name__]["properties"]
    kinds = "; ".join(defs[m.__name__]["properties"]["type"]["description"] for m in TRIGGER_MODELS.values())
    type_prop = {"title": "type", "type": "string", "enum": list(TRIGGER_MODELS)}
    _describe(type_prop, f"The trigger kind. {kinds}")
    props = {name: copy.deepcopy(base[name]) for name in ("id", "workflow", "description", "kind")}
    schema = {
        "title": "Trigger",
        "type": "object",
        "properties": {**props, "type": type_prop},
        "required": ["type"],
        "allOf": [{"if": {"properties": {"type": {"const": typ}}, "required": ["type"]},
                   "then": {"$ref": REF + model.__name__}} for typ, model in TRIGGER_MODELS.items()],
    }
    _describe(schema, "A trigger: what starts runs of a workflow, by `type` (event, webhook, schedule, manual).")
    return schema


# ---------------------------------------------------------------------------------------------- polish


def _describe(schema: dict[str, Any], text: str | None) -> None:
    if text:
        schema["description"] = " ".join(text.split())
        schema["markdownDescription"] = schema["description"]


def _non_null(prop: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X, {type: null}]` -> X, keeping the field's title and help."""
    options = [o for o in prop.get("anyOf", []) if o != {"type": "null"}]
    if len(options) != 1:
        return prop
    inner = copy.deepcopy(options[0])
    out = {"allOf": [inner]} if "$ref" in inner else inner
    for key in ("title", "description", "markdownDescription", "default"):
        if key in prop:
            out[key] = prop[key]
    if out.get("default", 0) is None:
        del out["default"]
    return out


def _each(schema: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    for node in list(subschemas(schema)):
        fn(node)


def _polish(schema: dict[str, Any]) -> None:
    """Make pydantic's output read well in a draft-07 editor (in place)."""
    _each(schema, _polish_node)


def _polish_node(node: dict[str, Any]) -> None:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node["$ref"] = REF + ref[len("#/$defs/"):]
    node.pop("discriminator", None)
    if node.get("default", 0) is None:  # `default: null` only says "optional", and editors would insert it
        del node["default"]
    if isinstance(node.get("default"), int) and not isinstance(node["default"], bool) and _is_duration(node):
        node["default"] = format_duration(node["default"])  # models keep ms; users write `60s`
    for name, prop in (node.get("properties") or {}).items():
        if isinstance(prop, dict):
            prop["title"] = name  # pydantic's "Maxoccurrences" helps nobody; the key is what users type
    if "description" in node:
        _describe(node, node["description"])
    if "$ref" in node and len(node) > 1:  # draft-07 ignores a $ref's siblings: keep them beside an allOf
        node["allOf"] = [{"$ref": node.pop("$ref")}] + node.get("allOf", [])


def _is_duration(node: dict[str, Any]) -> bool:
    return node.get("pattern") == DURATION_PATTERN or any(
        isinstance(o, dict) and o.get("pattern") == DURATION_PATTERN for o in node.get("anyOf", []))
