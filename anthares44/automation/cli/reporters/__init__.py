"""Output formats of `a44 automation lint`, chosen by name from a registry.

`REPORTERS` maps a format name to the module and class implementing it; `create(name, settings)` imports that
one module only, so the CLI pays for the format it uses. Every reporter subclasses `base.Reporter`.
"""

from __future__ import annotations

import importlib

from .base import Reporter, ReportSettings, Summary

REPORTERS: dict[str, tuple[str, str]] = {
    "text": ("text", "TextReporter"),
    "json": ("json_document", "JsonReporter"),
    "github": ("github_annotations", "GithubReporter"),
    "sarif": ("sarif_log", "SarifReporter"),
}

FORMATS: tuple[str, ...] = tuple(REPORTERS)


def create(name: str, settings: ReportSettings | None = None) -> Reporter:
    """Instantiate the reporter registered as `name`; KeyError lists the known names."""
    try:
        module_name, class_name = REPORTERS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known: {', '.join(FORMATS)}") from None
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, class_name)(settings)


__all__ = ["FORMATS", "REPORTERS", "Reporter", "ReportSettings", "Summary", "create"]
