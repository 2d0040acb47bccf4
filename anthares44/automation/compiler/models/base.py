"""The base model of the YAML surface: unknown keys are errors, values are immutable, YAML keys are aliases.

Field help lives in attribute docstrings, read by `docstrings.py` when the JSON Schema is generated (not at
import: pydantic's `use_attribute_docstrings` would parse the sources on every lint start)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, validate_default=False,
                              use_attribute_docstrings=False, hide_input_in_errors=True)


class OpenModel(BaseModel):
    """A model whose extra keys are kept: a step's connector parameters are validated by the connector's model."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=False, use_attribute_docstrings=False,
                              hide_input_in_errors=True)
