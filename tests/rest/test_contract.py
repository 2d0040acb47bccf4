"""The REST API's contract (app/contract/): the route table serves exactly the endpoints the client builds its
calls from, and each service's local class and REST twin take the parameters of the service's Protocol."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from anthares44.automation.app.contract import endpoints as ep
from anthares44.automation.app.contract.services import IMPLEMENTATIONS
from anthares44.automation.http import routes  # noqa: F401 - declares every route
from anthares44.automation.http.routing import ROUTES


def test_the_route_table_serves_every_endpoint_once():
    assert sorted((r.method, r.path) for r in ROUTES) == sorted((e.method, e.path) for e in ep.ENDPOINTS)
    assert all(r.endpoint in ep.ENDPOINTS for r in ROUTES)


def test_a_call_fills_and_quotes_every_segment():
    assert ep.RUN_LOGS.at(run_id="run_1/..").path == "/v1/automation/runs/run_1%2F../logs"
    with pytest.raises(TypeError):
        ep.RUN.at()
    with pytest.raises(TypeError):
        ep.RUNS.at(run_id="run_1")


def test_the_client_writes_no_path_of_its_own():
    for name in ("remote", "remote_services"):
        source = inspect.getsource(importlib.import_module(f"anthares44.automation.app.{name}"))
        assert not re.findall(r'f?"/[a-z{]', source) and '_call("' not in source, name


def _cls(ref: str) -> type:
    module, name = ref.split(":")
    return getattr(importlib.import_module(f"anthares44.automation.{module}"), name)


def _params(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("protocol", list(IMPLEMENTATIONS), ids=lambda p: p.__name__)
def test_local_and_remote_implement_the_service_protocol(protocol):
    members = [n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert members
    for ref in IMPLEMENTATIONS[protocol]:
        cls = _cls(ref)
        assert protocol in cls.__mro__, ref
        for name in members:
            impl = next((c.__dict__[name] for c in cls.__mro__ if name in c.__dict__), None)
            assert impl is not vars(protocol)[name], f"{ref} does not define {name}: the Protocol's stub answers"
            wanted = _params(vars(protocol)[name])
            have = [p for p in _params(impl) if p[0] in {w[0] for w in wanted}]
            extra = [p for p in _params(impl) if p[0] not in {w[0] for w in wanted}]
            assert have == wanted, f"{ref}.{name}: {have} != {wanted}"
            # a local class may take more, as optional keywords only (a trace parent, an origin)
            assert all(k == inspect.Parameter.KEYWORD_ONLY and d is not inspect.Parameter.empty
                       for _, k, d in extra), f"{ref}.{name} takes {extra}"


def test_the_answer_check_of_the_tests_refuses_what_the_route_does_not_declare():
    from types import SimpleNamespace

    from anthares44.automation.http.routes.runs import api_run_get, api_runs
    from tests.rest_answers import mismatch

    def check(handler, status, body, content_type="application/json"):
        return mismatch(SimpleNamespace(match_info=SimpleNamespace(handler=handler)), status, body, content_type)

    assert check(api_runs, 200, b'{"total": 0, "runs": []}') is None
    assert "does not match Runs" in check(api_runs, 200, b'{"total": 0}')
    assert "does not match Runs" in check(api_runs, 200, b'{"total": 0, "runs": [{"run_id": "run_1"}]}')
    assert "not the JSON of Runs" in check(api_runs, 200, b"total: 0", "text/plain")
    assert "does not declare" in check(api_runs, 202, b"{}")
    error = b'{"error": {"code": "E_RUN_NOT_FOUND", "message": "no run"}}'
    assert check(api_run_get, 404, error) is None
    assert "does not declare" in check(api_runs, 404, error)
    assert "does not match Error" in check(api_run_get, 404, b'{"code": "E_RUN_NOT_FOUND"}')
    assert check(lambda request: None, 500, b"") is None   # not a route of the table: webhooks, /metrics
