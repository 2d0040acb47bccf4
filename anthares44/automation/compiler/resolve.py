"""Resolution of a step's `uses` (and `compensate`) to a connector: built-in, declared instance or plugin.

Shared by the rules (to report) and the lowering (to record what the interpreter must call).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .models import BUILTIN_PARAMS

if TYPE_CHECKING:
    from .project import Project

PLUGIN_PREFIX = "connector/"


@dataclass(frozen=True)
class Resolution:
    kind: str              # builtin | declared | plugin | unknown | unresolved
    name: str              # the uses value
    type: str | None       # built-in type behind it (declared instances: their type; plugins: None)
    params_model: builtins.type[BaseModel] | None = None    # (`type` is the field above)

    @property
    def settled(self) -> bool:
        return self.kind in ("builtin", "declared", "plugin")


def resolve(uses: str, project: Project) -> Resolution:
    if uses in BUILTIN_PARAMS:
        return Resolution("builtin", uses, uses, BUILTIN_PARAMS[uses])
    if uses.startswith(PLUGIN_PREFIX):
        name = uses[len(PLUGIN_PREFIX):]
        if name in project.plugins:
            return Resolution("plugin", uses, None, None)
        return Resolution("unresolved", uses, None)
    model = project.connector_model(uses)
    if model is not None:
        return Resolution("declared", uses, model.type, BUILTIN_PARAMS.get(model.type))
    if uses.startswith("con_"):
        return Resolution("unresolved", uses, None)
    return Resolution("unknown", uses, None)


def plugin_params_model(uses: str, project: Project) -> tuple[Any, str | None]:
    """The params model a plugin declares (`params_model` attribute), or None; loading user code may fail."""
    ep = project.plugins.get(uses[len(PLUGIN_PREFIX):])
    if ep is None:          # not installed, or known without a model (Known.plugins)
        return None, None
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is the user's, reported as a diagnostic
        return None, f"{type(exc).__name__}: {exc}"
    return getattr(obj, "params_model", None), None
