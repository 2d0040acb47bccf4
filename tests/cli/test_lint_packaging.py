"""The pre-commit hook definition and the example connector plugin package (without pip-installing it)."""

from __future__ import annotations

import asyncio
import re
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "a44-payments"


def test_pre_commit_hook():
    from ruamel.yaml import YAML
    hooks = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "a44-lint"]
    assert hook["entry"] == "a44 automation lint"
    assert hook["language"] == "python"
    pattern = re.compile(hook["files"])
    assert pattern.search("automation/wf.yaml") and pattern.search("x.yml")
    assert not pattern.search("x.json") and not pattern.search("x.yaml.bak")


def test_plugin_declares_entry_points():
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "a44-payments"
    eps = meta["project"]["entry-points"]["anthares44.automation.connectors"]
    assert eps == {"payments.authorize": "a44_payments.connectors:authorize",
                   "payments.void": "a44_payments.connectors:void"}


@pytest.fixture
def plugin(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(PLUGIN / "src"))
    monkeypatch.setenv("A44_PAYMENTS_DB", str(tmp_path / "ledger.sqlite3"))
    for name in [m for m in sys.modules if m.startswith("a44_payments")]:
        monkeypatch.delitem(sys.modules, name)
    import a44_payments.connectors as connectors
    return connectors


def test_entry_point_targets_follow_the_protocol(plugin):
    from pydantic import BaseModel
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    for name, target in meta["project"]["entry-points"]["anthares44.automation.connectors"].items():
        module_name, attr = target.split(":")
        obj = getattr(__import__(module_name, fromlist=[attr]), attr)
        assert obj.name == name
        assert issubclass(obj.params_model, BaseModel)
        assert asyncio.iscoroutinefunction(obj.invoke)


def test_params_models_validate(plugin):
    from pydantic import ValidationError
    assert plugin.AuthorizeParams.model_validate({}).currency == "BRL"  # the seed's step has no `with:`
    ok = plugin.AuthorizeParams.model_validate({"amountCents": 249900, "currency": "BRL", "reference": "inv_8812"})
    assert ok.amountCents == 249900
    for bad in ({"amountCents": -1}, {"currency": "real"}, {"amount": 1}):
        with pytest.raises(ValidationError):
            plugin.AuthorizeParams.model_validate(bad)
    with pytest.raises(ValidationError):
        plugin.VoidParams.model_validate({"authorizationId": "nope"})


def ctx(run_id="run_1", step_id="reserve-funds"):
    return SimpleNamespace(run_id=run_id, step_id=step_id, idempotency_key=f"{run_id}:{step_id}")


def test_authorize_is_idempotent_and_void_compensates(plugin):
    params = plugin.AuthorizeParams(amountCents=249900, reference="inv_8812")
    first = asyncio.run(plugin.authorize.invoke(params, ctx()))
    again = asyncio.run(plugin.authorize.invoke(params, ctx()))
    other = asyncio.run(plugin.authorize.invoke(params, ctx(run_id="run_2")))
    assert first == again and first["status"] == "authorized" and first["amountCents"] == 249900
    assert other["authorizationId"] != first["authorizationId"]
    voided = asyncio.run(plugin.void.invoke(plugin.VoidParams(), ctx(step_id="reserve-funds")))
    assert voided == {"voided": [first["authorizationId"]]}
    from a44_payments.ledger import Ledger
    ledger = Ledger()
    assert ledger.status(first["authorizationId"]) == "voided"
    assert ledger.status(other["authorizationId"]) == "authorized"
    # voiding twice is harmless
    assert asyncio.run(plugin.void.invoke(plugin.VoidParams(authorizationId=first["authorizationId"]), ctx())) \
        == {"voided": [first["authorizationId"]]}


def test_authorize_declines_over_limit_permanently(plugin, monkeypatch):
    from anthares44.automation.errors import A44Error
    monkeypatch.setenv("A44_PAYMENTS_LIMIT_CENTS", "1000")
    with pytest.raises(A44Error) as exc:
        asyncio.run(plugin.authorize.invoke(plugin.AuthorizeParams(amountCents=1001), ctx()))
    assert exc.value.code == "E_PAYMENT_DECLINED" and exc.value.retryable is False
