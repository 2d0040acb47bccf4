"""Application functions (publish, run, wait, runs, logs, follow) shared by the CLI and the REST API.

`anthares44.automation.api` re-exports the public names; import from there. The four names below load on first
use (PEP 562): `a44 automation serve` imports app.serve, and an idle daemon without `--http-port` needs neither the
REST client nor the ingestion, queue and replay verbs and their models (issue 32: idle RSS).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ingestion import Ingestion  # the ingestion verbs (events, webhooks, tokens)
    from .queues import Queues  # queues and the dead-letter queue (§10)
    from .remote import RemoteAutomation  # the same verbs over a daemon's REST API (docs/cli.md)
    from .replay import replay  # replay from a step or an instant (§13)

_LAZY = {"Ingestion": ".ingestion", "Queues": ".queues", "RemoteAutomation": ".remote", "replay": ".replay"}
__all__ = ["Ingestion", "Queues", "RemoteAutomation", "replay"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
