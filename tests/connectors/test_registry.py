"""The registry: built-ins, declared instances, entry-point plugins from a real (temporary) distribution, and the
errors a user sees when a connector is missing or its parameters are wrong."""

from __future__ import annotations

import secrets
import sys
import textwrap

import pytest

from anthares44.automation.compiler.ir import ConnectorRef
from anthares44.automation.compiler.models.connectors import ConnectorDecl
from anthares44.automation.compiler.models.params import HttpParams, PassParams
from anthares44.automation.errors import E_CONNECTOR_FAILED, E_CONNECTOR_NOT_FOUND, E_PARAMS_INVALID, A44Error
from anthares44.automation.stdlib_connectors.registry import ConnectorRegistry, validate_params
from tests.connectors.support import run_step


@pytest.fixture
def plugin_dist(tmp_path, monkeypatch):
    """Install a real distribution into a directory on sys.path: a module and a `*.dist-info` with
    `entry_points.txt`, which importlib.metadata reads exactly as it reads a pip-installed one."""
    mod = f"a44_tmp_plugin_{secrets.token_hex(4)}"
    (tmp_path / f"{mod}.py").write_text(textwrap.dedent('''
        LOADS = []
        LOADS.append(1)   # counts imports: the registry must load the module once

        class Params:
            @classmethod
            def model_validate(cls, value):
                return dict(value)

        class Echo:
            name = "tmp.echo"
            params_model = None

            async def invoke(self, params, ctx):
                return {"params": params, "key": ctx.idempotency_key, "declared": ctx.declared}

        class Shout:
            """An entry point naming a class: the registry instantiates it."""
            name = "tmp.shout"
            params_model = None

            async def invoke(self, params, ctx):
                return str(params).upper()

        echo = Echo()
    '''))
    dist = tmp_path / "a44_tmp_plugin-0.3.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: a44-tmp-plugin\nVersion: 0.3.1\n")
    (dist / "entry_points.txt").write_text(
        "[anthares44.automation.connectors]\n"
        f"tmp.echo = {mod}:echo\n"
        f"tmp.shout = {mod}:Shout\n"
        f"tmp.broken = {mod}_missing:thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield mod
    sys.modules.pop(mod, None)


def test_builtins_resolve_by_name_and_are_shared(registry, make_ctx, aio):
    for uses in ("pass", "http", "sql/execute"):
        conn = registry.get(ConnectorRef(uses=uses, kind="builtin", type=uses))
        assert conn.name == uses and registry.get(uses) is conn  # one instance per registry
    assert registry.get("pass").params_model is PassParams
    out = aio(run_step(registry, {"uses": "pass", "kind": "builtin", "type": "pass"},
                       {"output": {"total": 3, "ids": [1, 2]}}, make_ctx()))
    assert out == {"total": 3, "ids": [1, 2]}


def test_declared_instance_gets_its_configuration(make_ctx, aio):
    decl = ConnectorDecl.model_validate({"id": "con_erp", "type": "http", "baseUrl": "http://127.0.0.1:1",
                                         "timeout": "20s"})
    reg = ConnectorRegistry([decl])
    conn = reg.get(ConnectorRef(uses="con_erp", kind="declared", type="http"))
    assert conn.name == "con_erp" and conn.params_model is HttpParams
    assert reg.declared("con_erp") == {"id": "con_erp", "type": "http", "baseUrl": "http://127.0.0.1:1",
                                       "timeout": 20_000}

    seen = []

    class Spy:
        name = "http"
        params_model = None

        async def invoke(self, params, ctx):
            seen.append(ctx.declared)
            return "ok"

    reg._builtins["http"] = Spy()  # the wrapper must pass the declaration through StepContext.declared
    assert aio(reg.get("con_erp").invoke({}, make_ctx())) == "ok"
    assert seen == [reg.declared("con_erp")]


def test_declared_errors():
    reg = ConnectorRegistry({"con_vpn": {"id": "con_vpn", "type": "vpn/http"}})
    with pytest.raises(A44Error) as exc:
        reg.get("con_nowhere")
    assert exc.value.code == E_CONNECTOR_NOT_FOUND and "declared" in exc.value.message
    assert reg.get("con_vpn").inner.name == "vpn/http"   # never plain http (§14)
    reg = ConnectorRegistry({"con_x": {"id": "con_x", "type": "ftp/put"}})
    with pytest.raises(A44Error) as exc:
        reg.get("con_x")  # a type this version does not ship: refused, never approximated
    assert exc.value.code == E_CONNECTOR_NOT_FOUND and "ftp/put" in exc.value.message


def test_entry_point_plugin_loads_once(plugin_dist, make_ctx, aio):
    reg = ConnectorRegistry()
    ref = ConnectorRef(uses="connector/tmp.echo", kind="plugin", type=None)
    conn = reg.get(ref)
    assert reg.get("connector/tmp.echo") is conn
    assert sys.modules[plugin_dist].LOADS == [1]
    out = aio(run_step(reg, ref, {"a": 1}, make_ctx()))
    assert out == {"params": {"a": 1}, "key": "run_01TEST:charge", "declared": None}
    assert aio(run_step(reg, "connector/tmp.shout", "hi", make_ctx())) == "HI"  # a class is instantiated
    # an IR written before the plugin was installed says `unresolved`; the uses value still finds it
    assert reg.get({"uses": "connector/tmp.echo", "kind": "unresolved", "type": None}) is conn
    listed = {d["uses"]: d for d in reg.list_installed()}
    assert listed["connector/tmp.echo"]["source"] == "a44-tmp-plugin 0.3.1"
    assert listed["pass"]["source"] == "builtin"


def test_broken_plugin_reports_its_cause(plugin_dist):
    with pytest.raises(A44Error) as exc:
        ConnectorRegistry().get("connector/tmp.broken")
    assert exc.value.code == E_CONNECTOR_NOT_FOUND and "ModuleNotFoundError" in exc.value.message


def test_unknown_connector_lists_what_is_installed(plugin_dist):
    reg = ConnectorRegistry()
    hints = {}
    for uses in ("connector/tmp.nope", "nope/thing"):
        with pytest.raises(A44Error) as exc:
            reg.get(uses)
        err = exc.value
        assert err.code == E_CONNECTOR_NOT_FOUND and not err.retryable
        assert repr(uses) in err.message
        assert "connector/tmp.echo" in err.message and "sql/execute" in err.message
        hints[uses] = err.hint
    assert "anthares44.automation.connectors" in hints["connector/tmp.nope"]


def test_register_wins_and_is_listed(make_ctx, aio):
    class Fake:
        name = "http"
        params_model = None

        async def invoke(self, params, ctx):
            return "fake"

    reg = ConnectorRegistry()
    reg.register(Fake())
    assert aio(run_step(reg, "http", {}, make_ctx())) == "fake"
    assert {"name": "http", "uses": "http", "source": "registered"} in reg.list_installed()


def test_validate_params_names_fields_not_values(registry):
    http = registry.get("http")
    with pytest.raises(A44Error) as exc:
        validate_params(http, {"url": "http://x", "method": "BREW", "headers": {"a": ["sekrit"]}})
    err = exc.value
    assert err.code == E_PARAMS_INVALID and not err.retryable
    assert "method" in err.message and "headers" in err.message and "sekrit" not in err.message
    assert validate_params(http, {"url": "http://x", "json": {"a": 1}}).json_ == {"a": 1}


def test_invoke_validates_and_wraps_unexpected_exceptions(make_ctx, aio):
    class Buggy:
        name = "buggy"
        params_model = PassParams

        async def invoke(self, params, ctx):
            if params.output == "boom":
                raise KeyError("oops")
            return params.output

    reg = ConnectorRegistry()
    reg.register(Buggy())
    assert aio(reg.invoke("buggy", {"output": [1]}, make_ctx())) == [1]
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("buggy", {"output": "boom"}, make_ctx()))
    assert exc.value.code == E_CONNECTOR_FAILED and "KeyError" in exc.value.message and not exc.value.retryable
    with pytest.raises(A44Error) as exc:
        aio(reg.invoke("buggy", {"nope": 1}, make_ctx()))
    assert exc.value.code == E_PARAMS_INVALID


def test_the_runtime_services_are_withheld_from_every_connector_but_their_own(make_ctx, aio):
    """A plugin (here a registered connector) and sql/execute never see the event publisher, the breakers' state,
    or a control store left in the services; the application database they do see. queue/publish sees the
    publisher, no other built-in does."""
    seen = []

    class Spy:
        name, params_model = "spy", None

        async def invoke(self, params, ctx):
            seen.append(sorted(ctx.services))
            return {}

    reg = ConnectorRegistry()
    reg.register(Spy())
    services = {"store": object(), "app_db": object(), "publisher": object(), "breaker_state": object()}
    aio(reg.invoke("spy", {}, make_ctx(services=services)))
    assert seen[0] == ["app_db"]
    assert reg._may_see(reg.get("queue/publish"), "publisher")
    assert not any(reg._may_see(reg.get(uses), service) for uses in ("sql/execute", "http", "queue/publish")
                   for service in ("store", "breaker_state"))
    assert not reg._may_see(reg.get("sql/execute"), "publisher")
