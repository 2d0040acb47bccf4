"""The pre-commit hook definition and the example connector plugin package (without pip-installing it)."""

from __future__ import annotations

import asyncio
import re
import sys
import tomllib
from pathlib import Path

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


# The connectors' behaviour (an HTTP call to the payments API, idempotent on the step's key; the saga's void;
# error codes) is tested against the plugin's stand-in server in tests/e2e/test_payments_plugin.py.
