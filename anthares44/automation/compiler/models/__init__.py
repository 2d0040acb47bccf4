"""Typed models of every file kind of the YAML surface (pydantic v2; unknown keys are errors)."""

from .connectors import ConnectorDecl
from .monitoring import CHANNEL_MODELS, AlertRule
from .params import BUILTIN_PARAMS
from .queues import Queue
from .triggers import TRIGGER_MODELS, InlineTrigger
from .workflow import Step, Workflow

__all__ = ["AlertRule", "BUILTIN_PARAMS", "CHANNEL_MODELS", "ConnectorDecl", "InlineTrigger", "Queue", "Step", "TRIGGER_MODELS", "Workflow"]
