"""The committed schemas as an editor uses them: the real yaml-language-server (VS Code's YAML engine), driven
over LSP stdio, completes, hovers and validates documents that name a schema under schemas/ by modeline.

Completion must offer only keys that then validate, hover must show a field's help once, and `any.schema.json`
must give a file the error about its own mistake. Skips (with how to install) when the server is missing.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.editor.lsp import INSTALL_HINT, LanguageServer, server_command
from tests.seed_texts import SEED_CONNECTOR, SEED_EVENT_TRIGGER, SEED_SCHEDULE_TRIGGER, SEED_WORKFLOW

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
CURSOR = "<|>"
NOT_ALLOWED = "is not allowed"

COMMAND = server_command()
pytestmark = pytest.mark.skipif(COMMAND is None, reason=f"yaml-language-server not found; {INSTALL_HINT}")

QUEUE = """\
id: q_invoice_settle
maxConcurrency: 25
ordering: by-partition
maxAttempts: 8
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ls = LanguageServer(COMMAND, tmp_path_factory.mktemp("editor"))
    yield ls
    ls.close()


_names = itertools.count()


class Doc:
    """One document opened in the server with a modeline naming a committed schema; `<|>` marks the cursor."""

    def __init__(self, server: LanguageServer, kind: str, body: str) -> None:
        text = f"# yaml-language-server: $schema={(SCHEMAS / f'{kind}.schema.json').as_uri()}\n{body}"
        self.cursor = None
        if CURSOR in text:
            before = text[:text.index(CURSOR)].split("\n")
            self.cursor = (len(before) - 1, len(before[-1]))
            text = text.replace(CURSOR, "")
        self.server, self.text = server, text
        self.uri = f"file:///a44-editor-test/{next(_names)}-{kind}.yaml"
        server.open(self.uri, text)
        self.diagnostics = [d["message"] for d in server.diagnostics(self.uri)]

    def completion(self) -> set[str]:
        return self.server.completion_keys(self.uri, *self.cursor)

    def hover(self, key: str) -> str:
        line = next(i for i, text in enumerate(self.text.split("\n")) if text.strip().startswith(f"{key}:"))
        return self.server.hover_text(self.uri, line, self.text.split("\n")[line].index(key) + 1)


def offered_keys_validate(server, kind: str, body: str, value: str = "x") -> set[str]:
    """Complete at the cursor, then write each offered key there: the keys the schema then rejects."""
    offered = Doc(server, kind, body).completion()
    assert offered, "the server offered nothing: the schema did not apply"
    rejected = set()
    for key in offered:
        doc = Doc(server, kind, body.replace(CURSOR, f"{key}: {value}"))
        if any(NOT_ALLOWED in m and key in m for m in doc.diagnostics):
            rejected.add(key)
    return rejected


HTTP_STEP = """\
name: w
version: 1
steps:
  - id: call
    uses: http
    timeout: 5s
    url: https://example.invalid/x
    <|>
"""
SQL_STEP = HTTP_STEP.replace("uses: http", "uses: sql/execute").replace("url: https://example.invalid/x",
                                                                       "query: select 1")
SLEEP_STEP = """\
name: w
version: 1
steps:
  - id: nap
    sleep: 30s
    <|>
"""


def test_committed_seed_files_have_no_diagnostics(server):
    for kind, text in [("workflow", SEED_WORKFLOW), ("triggers", SEED_EVENT_TRIGGER),
                       ("triggers", SEED_SCHEDULE_TRIGGER), ("connectors", SEED_CONNECTOR), ("queues", QUEUE)]:
        for schema in (kind, "any"):
            assert Doc(server, schema, text).diagnostics == [], (schema, text)


@pytest.mark.parametrize("body,absent,present", [
    (HTTP_STEP, {"sleep", "with", "params"}, {"method", "headers", "body", "retry", "compensate", "needs"}),
    (SQL_STEP, {"sleep", "with", "url", "method"}, {"params", "retry", "compensate", "exclusive"}),
    (SLEEP_STEP, {"timeout", "retry", "compensate", "exclusive", "uses", "with"}, {"needs", "if", "description"}),
], ids=["http", "sql-execute", "sleep"])
def test_step_completion_offers_only_its_form_keys(server, body, absent, present):
    offered = Doc(server, "workflow", body).completion()
    assert not offered & absent, f"offered keys this step's form rejects: {sorted(offered & absent)}"
    assert present <= offered, f"missing: {sorted(present - offered)}"


@pytest.mark.parametrize("body", [HTTP_STEP, SQL_STEP, SLEEP_STEP], ids=["http", "sql-execute", "sleep"])
def test_every_offered_step_key_validates(server, body):
    assert offered_keys_validate(server, "workflow", body) == set()


def test_a_new_step_is_offered_both_forms(server):
    offered = Doc(server, "workflow", "name: w\nversion: 1\nsteps:\n  - id: s\n    <|>\n").completion()
    assert {"uses", "sleep", "timeout"} <= offered


def test_hover_shows_the_timeout_examples_once(server):
    text = Doc(server, "workflow", HTTP_STEP.replace(CURSOR, "")).hover("timeout")
    assert "time limit of one attempt" in text
    assert text.count("250ms") == 1, text


@pytest.mark.parametrize("kind,text,typo,message", [
    ("connectors", SEED_CONNECTOR, ("network:", "netwrok:"), "Property netwrok is not allowed"),
    ("queues", "id: q_invoice_settle\nmaxConcurrency: 25\n", ("maxConcurrency:", "maxConcurency:"),
     "Property maxConcurency is not allowed"),
    ("queues", QUEUE, ("by-partition", "by-partitoin"), 'Valid values: "none", "by-partition"'),
    ("triggers", SEED_SCHEDULE_TRIGGER, ("overlap:", "overlpa:"), "Property overlpa is not allowed"),
    ("triggers", SEED_EVENT_TRIGGER, ("type: event", "type: evnt"), 'Valid values: "event", "webhook"'),
    ("workflow", SEED_WORKFLOW, ("version:", "verison:"), "Property verison is not allowed"),
], ids=["connector-key", "queue-key", "queue-value", "trigger-key", "trigger-type", "workflow-key"])
def test_any_schema_reports_each_kind_its_own_mistake(server, kind, text, typo, message):
    bad = text.replace(*typo, 1)
    for schema in (kind, "any"):
        found = Doc(server, schema, bad).diagnostics
        assert any(message in m for m in found), f"{schema}.schema.json: {message!r} not among {found}"


@pytest.mark.parametrize("body,absent,present", [
    ("- id: con_x\n  <|>\n", {"maxConcurrency", "workflow", "ordering"}, {"type", "baseUrl", "network", "auth"}),
    ("- id: trg_x\n  type: schedule\n  <|>\n", {"baseUrl", "metric", "maxConcurrency"}, {"cron", "tz", "workflow"}),
    ("id: q_x\n<|>\n", {"type", "baseUrl", "steps"}, {"maxConcurrency", "ordering"}),
], ids=["connector-by-id", "trigger-by-type", "queue-by-id"])
def test_any_schema_completes_the_kind_the_shape_tells(server, body, absent, present):
    offered = Doc(server, "any", body).completion()
    assert not offered & absent, f"offered keys of another kind: {sorted(offered & absent)}"
    assert present <= offered, f"missing: {sorted(present - offered)}"
