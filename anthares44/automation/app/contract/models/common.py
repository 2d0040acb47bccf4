"""The types every area shares: closed request bodies, open answer documents, ids and texts with the limits the
path parameters have (checked by http/params.py), and the error document."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# ids in a path segment: checked by http/params.py, typed here
MAX_ID_LEN = 200
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LEN, pattern=f"^{ID_PATTERN.pattern}$")]
# free text stored in the database: no NUL (PostgreSQL text cannot hold it), bounded
Text = Annotated[str, Field(max_length=10_000, pattern=r"^[^\x00]*$")]
NonBlank = Annotated[str, Field(min_length=1, max_length=10_000, pattern=r"^[^\x00]*\S[^\x00]*$",
                                description="text with at least one non-blank character")]
Age = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[^\x00]*$",
                           description="an age: 250ms, 60s, 15m, 48h, 7d")]


class Body(BaseModel):
    """A request body: unknown keys and wrong types are refused (400 E_INVALID_ARGUMENT)."""
    model_config = ConfigDict(extra="forbid", strict=True)


class Doc(BaseModel):
    """An answer: the fields listed are always there; others may be added."""
    model_config = ConfigDict(extra="allow")


class ErrorDetail(BaseModel):
    code: str = Field(description="stable error code (docs/errors.md)")
    message: str
    hint: str | None = None
    details: dict | None = Field(None, description="what the caller needs to fix it, for the codes docs/errors.md "
                                                   "marks (details), e.g. E_DLQ_FILTER's diagnostics with columns")


class Error(BaseModel):
    error: ErrorDetail


class Removed(Doc):
    removed: str
