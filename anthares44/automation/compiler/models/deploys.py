"""The YAML of a workflow's deploy behaviour (§23, docs/deploys.md): `versioning` (what happens to open runs of
older versions when this one is published) and the `migrate:` block (how runs of older versions map onto this
one for `runs migrate` and the plan). The shapes are here; the values and the step names they mention are checked
by rules/deploys.py (A44300-A44305), so a wrong value is named with what is allowed.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictStr, WithJsonSchema

from .base import Model
from .types import Version

VERSIONING = ("pin", "auto-upgrade")
ADDED_BEFORE_FRONTIER = ("skip", "run")
REMOVED = ("skip",)

Versioning = Annotated[StrictStr, WithJsonSchema({"type": "string", "enum": list(VERSIONING)})]
AddedBeforeFrontier = Annotated[StrictStr, WithJsonSchema({"type": "string", "enum": list(ADDED_BEFORE_FRONTIER)})]
RemovedAction = Annotated[StrictStr, WithJsonSchema({"type": "string", "enum": list(REMOVED)})]


class Migrate(Model):
    """How open runs of older versions move to this version (`a44 automation runs migrate`, docs/deploys.md)."""

    from_: list[Version] = Field(alias="from", min_length=1)
    """The older versions whose runs this block covers, e.g. `[3]`."""
    rename: dict[StrictStr, StrictStr] | None = None
    """Old step id -> new step id: a completed step keeps its result under its new id (never re-run)."""
    removed: dict[StrictStr, RemovedAction] | None = None
    """Steps of the old version that are gone: `skip` forgets a completed one (its output is no longer in scope)."""
    addedBeforeFrontier: AddedBeforeFrontier | None = None
    """A new step placed before where a run stands: `skip` records it skipped, `run` runs it at the next visit."""
    outputs: dict[StrictStr, StrictStr] | None = None
    """New step id -> CEL over `output` (the completed step's old output): its output in this version."""
