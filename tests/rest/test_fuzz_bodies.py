"""Random bodies, shaped after each endpoint's request model and not, to every REST endpoint that takes one (and
random ids to the rest): never a 5xx, always our error document, never a traceback or E_INTERNAL in the server's
log. The channel test endpoint is left out: a valid channel would send a message."""

from __future__ import annotations

import asyncio
import json
import re
import secrets

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anthares44.automation.http.openapi import ROUTES as DECLARED
from tests.ingestion.support import LiveServer, bearer, request

from .support import publish_project, tokens_of

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
ROUTES = [r for r in DECLARED if r.path != "/v1/automation/channels/{name}/test" and r.method != "GET"]
LOOPBACK = "http://127.0.0.1:9/x"

scalar = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False),
                   st.text(max_size=12), st.sampled_from(["24h", "10/s", "-1", "never", "\x00", "run_x", "only",
                                                          "automation:admin", "p1", "slack", "2026-07-01T00:00:00Z",
                                                          "error_code == 'E'", "a" * 300]))
value = st.recursive(scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=6)


def _shaped(route):
    """A dict of the model's own keys (and sometimes one more) with random values: deep enough to pass the first
    checks and reach the app function."""
    keys = [f.alias or n for n, f in route.body.model_fields.items()]
    return st.dictionaries(st.sampled_from(keys + ["extra"]), value, max_size=len(keys) + 1)


def _path(route, draw_id):
    return re.sub(r"{(\w+)}", lambda m: draw_id, route.path)


@pytest.fixture(scope="module")
def target(pg_admin_url, pg_template, tmp_path_factory):
    from tests.runtime.pg import _admin, with_database

    name = f"a44_test_{secrets.token_hex(6)}"
    asyncio.run(_admin(pg_admin_url, f"create database {name} template {pg_template}"))
    tmp = tmp_path_factory.mktemp("restfuzz")
    live = LiveServer(with_database(pg_admin_url, name), results_dir=tmp / "results")
    try:
        publish_project(live, tmp / "proj")
        yield live, tokens_of(live)["admin"]
        log = live.log_text()
        assert "Traceback" not in log and "E_INTERNAL" not in log, log[-4000:]
    finally:
        live.close()
        asyncio.run(_admin(pg_admin_url, f"drop database if exists {name} with (force)"))


def _no_outside_urls(doc):
    """Any URL a fuzzed channel could keep points at a closed loopback port."""
    if isinstance(doc, dict):
        return {k: (LOOPBACK if k == "url" else _no_outside_urls(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_no_outside_urls(v) for v in doc]
    return doc


@FUZZ
@given(data=st.data())
def test_random_bodies_never_5xx(target, data):
    live, token = target
    route = data.draw(st.sampled_from(ROUTES))
    ident = data.draw(st.one_of(st.sampled_from(["trg_hook", "q_default", "run_x", "1", "squad", "dlq-1"]),
                                st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=10)))
    body = data.draw(st.one_of(_shaped(route), value) if route.body else st.just(None))
    raw = data.draw(st.one_of(st.just(json.dumps(_no_outside_urls(body)).encode()), st.binary(max_size=40)))
    status, doc, _ = request(live.port, route.method, _path(route, ident), raw, bearer(token))
    assert status < 500, (route.method, route.path, raw, doc)
    if status >= 400 and status not in route.endpoint.answers:   # e.g. publish's 422 is its report, not an error
        assert isinstance(doc, dict) and isinstance(doc["error"]["code"], str), doc
