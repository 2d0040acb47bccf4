"""The installed connectors, built-in and plugins, with where each comes from (`connectors list`, `GET
/v1/automation/connectors`)."""

from __future__ import annotations


def installed() -> list[dict]:
    from ..compiler.models.params import BUILTIN_PARAMS
    from ..stdlib_connectors.registry import _BUILTINS, ConnectorRegistry

    reg = ConnectorRegistry()
    out = []
    for d in reg.list_installed():
        d = dict(d)
        if d["source"] == "builtin":
            d["value"] = _BUILTINS[d["uses"]]
            model = BUILTIN_PARAMS.get(d["uses"])
            d["source"] = "builtin (anthares44-automation)"
            if model is not None:
                d["params"] = sorted(f.alias or n for n, f in model.model_fields.items())
        out.append(d)
    return out
