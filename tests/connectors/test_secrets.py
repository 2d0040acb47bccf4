"""Secrets (§17): the sources (environment, encrypted file), scrubbing (short values, unexpected exceptions), and
real runs on the engine whose connector uses a bearer secret or an OAuth access token the far side echoes back,
after which neither the whole database nor the log output contains the secret or the token."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import re
import stat
import urllib.parse

import asyncpg
import pytest
from aiohttp import web

from anthares44.automation.compiler.ir import ConnectorRef
from anthares44.automation.errors import E_SECRET_KEY_MISMATCH, E_SECRET_NOT_FOUND, A44Error
from anthares44.automation.redact import scrub
from anthares44.automation.runtime.secrets.cipher import Undecryptable, open_entry, seal
from anthares44.automation.runtime.secrets.file import SecretFile
from anthares44.automation.runtime.secrets.source import SecretSource
from anthares44.automation.settings import Settings
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry
from tests.runtime.engine_support import node, publish_and_run, run_row, workflow

SECRET = "s3cr3t-VALUE-9f8e7d6c"


def test_env_then_file_then_missing(tmp_path, monkeypatch, aio):
    f = SecretFile(tmp_path)
    f.set("sec_file", "from-the-file")
    assert stat.S_IMODE(os.stat(f.path).st_mode) == 0o600 and stat.S_IMODE(os.stat(f.key_path).st_mode) == 0o600
    assert b"from-the-file" not in f.path.read_bytes()            # encrypted at rest
    assert "sec_file" in f.path.read_text() and f.names() == ["sec_file"]
    src = SecretSource(file=f)
    assert aio(src("sec_file")) == "from-the-file"
    monkeypatch.setenv("A44_SECRET_SEC_FILE", "from-the-env")
    assert aio(src("sec_file")) == "from-the-env"                # the environment wins
    with pytest.raises(A44Error) as exc:
        aio(src("sec_nope"))
    assert exc.value.code == E_SECRET_NOT_FOUND and "A44_SECRET_SEC_NOPE" in exc.value.hint
    with pytest.raises(A44Error):
        aio(src("../etc/passwd"))
    assert f.remove("sec_file") and f.names() == []


def test_wrong_key_or_tampering_fails_authentication(tmp_path):
    key = os.urandom(32)
    entry = seal(key, b"hello", "sec_a")
    assert open_entry({entry["kid"]: key}, entry, "sec_a") == b"hello"
    for k, ref in ((os.urandom(32), "sec_a"), (key, "sec_b")):   # another key, or moved to another name
        with pytest.raises(Undecryptable):
            open_entry({entry["kid"]: k}, entry, ref)
    f = SecretFile(tmp_path, key=key.hex())                       # A44_SECRET_KEY
    f.set("sec_x", "v")
    assert not f.key_path.exists() and f.get("sec_x") == "v"
    with pytest.raises(A44Error) as exc:
        SecretFile(tmp_path, key=os.urandom(32).hex()).get("sec_x")
    assert exc.value.code == E_SECRET_KEY_MISMATCH and "v" not in exc.value.message.split(":")[-1]


def test_scrub_any_depth_and_structured_parts():
    src = SecretSource({"sec_c": json.dumps({"client_id": "cid-123", "client_secret": "csecret-456"})})
    src.get("sec_c")
    out = scrub({"a": [{"b": "x cid-123 y"}], "csecret-456": 1}, src.values())
    assert out == {"a": [{"b": "x [redacted] y"}], "[redacted]": 1}


def test_encoded_forms_of_a_secret_are_scrubbed():
    """base64 and base64url (padded or not, alone, as `Bearer <secret>`, as `user:<secret>`, at every byte offset
    inside a longer encoded text), hex, URL-encoded and JSON-escaped forms."""
    secret = 'tok"en/With+Odd é'
    raw = secret.encode()
    texts = {"alone": base64.b64encode(raw).decode(), "bearer": base64.b64encode(b"Bearer " + raw).decode(),
             "bearer_url": base64.urlsafe_b64encode(b"Bearer " + raw).decode().rstrip("="),
             "basic": base64.b64encode(b"user:" + raw).decode(), "hex": raw.hex(), "HEX": raw.hex().upper(),
             "url": urllib.parse.quote(secret, safe=""), "url_lower": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(secret, safe="")),
             "plus": urllib.parse.quote_plus(secret), "json": json.dumps({"a": secret}),
             "json_utf8": json.dumps({"a": secret}, ensure_ascii=False)}
    for k in range(6):          # every offset inside a longer text
        texts[f"offset{k}"] = base64.b64encode(b"x" * k + raw + b"tail").decode()
    out = scrub(texts, [secret])
    for name, text in out.items():
        assert "[redacted]" in text, (name, text)
        rest = text.replace("[redacted]", "")
        assert len(rest) <= len(texts[name]) - len(secret) // 2, (name, text)
    assert out["alone"] == "[redacted]" and out["hex"] == "[redacted]"
    # what the secret does not decide is kept: the encoded `Bearer ` and `tail`
    assert out["bearer"].startswith("QmVhcmVy") and out["offset0"].endswith(base64.b64encode(b"tail").decode()[2:])
    # unrelated base64 data and a short secret's encodings are left alone
    assert scrub({"d": base64.b64encode(b"other data here").decode()}, [secret, "42"]) == \
        {"d": base64.b64encode(b"other data here").decode()}


def test_short_secrets_are_scrubbed_where_they_stand_alone():
    src = SecretSource({"sec_pin": "42", "sec_c": json.dumps({"client_id": "x", "client_secret": "s3cr3t-long"})})
    src.get("sec_pin")
    src.get("sec_c")
    out = scrub({"pin": "42", "msg": "pin 42 refused; id=x", "auth": "Bearer x", "42": 42,
                 "kept": ["4242", "v42", "42a", "xx", "max", "s3cr3t-longer"], "json": '{"pin":"42"}'},
                src.values())
    assert out == {"pin": "[redacted]", "msg": "pin [redacted] refused; id=[redacted]", "auth": "Bearer [redacted]",
                   "[redacted]": 42, "kept": ["4242", "v42", "42a", "xx", "max", "[redacted]er"],
                   "json": '{"pin":"[redacted]"}'}


async def dump(pg_url: str) -> str:
    """Every row of every table of the database, as text."""
    conn = await asyncpg.connect(pg_url)
    try:
        tables = await conn.fetch("select table_schema, table_name from information_schema.tables "
                                  "where table_schema not in ('pg_catalog', 'information_schema') "
                                  "and table_type = 'BASE TABLE'")
        out = []
        for t in tables:
            rows = await conn.fetch(f'select t::text as r from "{t[0]}"."{t[1]}" t')
            out.extend(r["r"] for r in rows)
        return "\n".join(out)
    finally:
        await conn.close()


def echo_app(hits: list):
    async def echo(request):
        hits.append(dict(request.headers))
        if request.path == "/fail":        # an error body that repeats the credential
            return web.json_response({"error": "bad", "you_sent": request.headers.get("Authorization")}, status=500)
        auth = (request.headers.get("Authorization") or "").encode()
        # a far side that echoes the credential encoded (issue 24 item 8): each form must be scrubbed too
        return web.json_response({"seen": request.headers.get("Authorization"),
                                  "nested": [{"token": "tok-in-result"}],
                                  "b64": base64.b64encode(auth).decode(),
                                  "b64url": base64.urlsafe_b64encode(auth).decode().rstrip("="),
                                  "hex": auth.hex(), "quoted": urllib.parse.quote(auth.decode(), safe=""),
                                  "text": json.dumps({"auth": auth.decode()})})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


def test_a_run_using_a_secret_leaves_no_trace_of_it(store, clock, pg_url, serve, aio, monkeypatch, caplog,
                                                    tmp_path):
    from anthares44.automation.runtime.engine import Engine

    monkeypatch.setenv("A44_SECRET_SEC_API", SECRET)
    hits: list = []
    base = serve(echo_app(hits))
    config = {"id": "con_api", "type": "http", "baseUrl": base, "auth": {"kind": "bearer", "secretRef": "sec_api"}}
    ref = ConnectorRef(uses="con_api", kind="declared", type="http", config=config)
    ok = node("fetch", params={"path": "/echo"}).model_copy(update={"connector": ref})
    bad = node("fail", params={"path": "/fail"}, retry=(1, "fixed"), base_ms=0).model_copy(update={"connector": ref})
    ir = workflow([ok, bad], name="secrets")
    run_id = aio(publish_and_run(store, ir))
    caplog.set_level(logging.DEBUG)
    eng = Engine(store, ConnectorRegistry(), clock=clock, settings=Settings(home=str(tmp_path)))
    aio(eng.drive())
    run = aio(run_row(store, run_id))
    assert run["state"] == "failed" and run["error_code"] == "E_UPSTREAM_500"
    assert len(hits) == 3 and all(h["Authorization"] == f"Bearer {SECRET}" for h in hits)   # it was sent

    everything = aio(dump(pg_url))
    assert "[redacted]" in everything and "Bearer" in everything      # the results were written, scrubbed
    assert SECRET not in everything
    raw = SECRET.encode()
    for encoded in (base64.b64encode(raw).decode(), base64.b64encode(b"Bearer " + raw).decode()[12:-4],
                    base64.urlsafe_b64encode(b"Bearer " + raw).decode()[12:-4], raw.hex(),
                    urllib.parse.quote(SECRET, safe="")):
        assert encoded not in everything, encoded
    assert "tok-in-result" not in everything                          # key-based redaction at depth
    assert SECRET not in caplog.text


def test_an_unexpected_exception_carrying_a_secret_is_scrubbed(make_ctx, aio, caplog):
    class Leaky:
        name = "leaky"
        params_model = None

        async def invoke(self, params, ctx):
            raise RuntimeError(f"could not use {await ctx.secret('sec_api')}")

    reg = ConnectorRegistry(secrets={"sec_api": SECRET})
    reg.register(Leaky())
    caplog.set_level(logging.DEBUG)
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("leaky", {}, dataclasses.replace(make_ctx(), secrets=None)))
    assert exc.value.code == "E_CONNECTOR_FAILED" and "[redacted]" in exc.value.message
    assert SECRET not in str(exc.value) and exc.value.__cause__ is None and SECRET not in caplog.text


TOKEN = "at-Z9y8X7w6V5u4T3s2"


def oauth_echo_app(tokens_sent: list):
    """A token endpoint and an API that repeats the bearer token in its answers, in errors too."""

    async def token(request):
        tokens_sent.append(TOKEN)
        return web.json_response({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600})

    async def api(request):
        got = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if request.path.endswith("/fail"):
            return web.json_response({"error": f"token {got} is not allowed here", "echo": got}, status=500)
        return web.json_response({"seen": f"Bearer {got}", "note": f"hello {got}!", got: "as a key"})

    app = web.Application()
    app.router.add_post("/oauth/token", token)
    app.router.add_route("*", "/api/{tail:.*}", api)
    return app


def test_an_oauth_access_token_leaves_no_trace(store, clock, pg_url, serve, aio, monkeypatch, caplog, tmp_path,
                                               make_ctx):
    from anthares44.automation.runtime.engine import Engine

    monkeypatch.setenv("A44_SECRET_SEC_ERP_CLIENT", json.dumps({"client_id": "a44-client",
                                                                "client_secret": "cs-0123456789"}))
    tokens_sent: list = []
    base = serve(oauth_echo_app(tokens_sent))
    config = {"id": "con_erp", "type": "http", "baseUrl": base + "/api",
              "auth": {"kind": "oauth2-client-credentials", "secretRef": "sec_erp_client",
                       "tokenUrl": base + "/oauth/token"}}
    ref = ConnectorRef(uses="con_erp", kind="declared", type="http", config=config)
    ok = node("fetch", params={"path": "/echo"}).model_copy(update={"connector": ref})
    bad = node("fail", params={"path": "/fail"}, retry=(1, "fixed"), base_ms=0).model_copy(update={"connector": ref})
    run_id = aio(publish_and_run(store, workflow([ok, bad], name="oauth_secrets")))
    caplog.set_level(logging.DEBUG)
    reg = ConnectorRegistry()
    aio(Engine(store, reg, clock=clock, settings=Settings(home=str(tmp_path))).drive())
    run = aio(run_row(store, run_id))
    assert run["state"] == "failed" and run["error_code"] == "E_UPSTREAM_500"
    assert tokens_sent == [TOKEN]                  # fetched once, then served from the cache to later attempts
    everything = aio(dump(pg_url))
    assert '"hello [redacted]!' in everything and "Bearer [redacted]" in everything   # written, scrubbed
    assert TOKEN not in everything and "cs-0123456789" not in everything
    # the error itself (its details keep the upstream body, which the database does not store)
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke(ref, {"path": "/fail"}, dataclasses.replace(make_ctx(), secrets=None)))
    assert exc.value.details["body"] == {"error": "token [redacted] is not allowed here", "echo": "[redacted]"}
    assert TOKEN not in str(exc.value) and TOKEN not in caplog.text
    aio(reg.aclose())
