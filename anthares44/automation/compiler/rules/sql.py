"""SQL rules (§3.7, §14): `sql/execute` never takes templates in `query` (values go in `params:`, bound by
the driver, never spliced); `$n` placeholders must match the params given."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, Severity, register
from ..templating import is_template

if TYPE_CHECKING:
    from ..project import Project

A44500 = register("A44500", "template inside SQL query")
A44501 = register("A44501", "SQL placeholder without params", Severity.WARNING)
A44502 = register("A44502", "SQL placeholders and params disagree")

_PLACEHOLDER = re.compile(r"\$(\d+)")
_STRINGS = re.compile(r"'(?:[^']|'')*'")


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        src = decl.src
        for i, step in enumerate(decl.model.steps):
            extra = step.model_extra or {}
            query = extra.get("query")
            if step.uses != "sql/execute" and not _is_sql_connector(project, step.uses):
                continue
            if not isinstance(query, str):
                continue
            path = decl.path + ("steps", i, "query")
            if is_template(query):
                off = query.find("{{") if "{{" in query else query.find("{%")
                yield Diagnostic.at(A44500, "SQL query contains a template; values are never spliced into SQL",
                                    src.path, src.scalar_span(path, off, 2),
                                    hint="write $1, $2... in the query and put the values in `params:`")
                continue
            numbers = {int(n) for n in _PLACEHOLDER.findall(_STRINGS.sub("", query))}
            params = extra.get("params")
            if numbers and params is None:
                first = _PLACEHOLDER.search(query)
                assert first is not None   # `numbers` came from the same pattern
                yield Diagnostic.at(A44501, f"query uses ${max(numbers)} placeholder(s) but the step has no "
                                            f"params", src.path, src.scalar_span(path, first.start(), 2),
                                    hint="add `params: [...]` with one value per placeholder")
            elif isinstance(params, list) and numbers and max(numbers) > len(params):
                yield Diagnostic.at(A44502, f"query uses ${max(numbers)} but params has {len(params)} value(s)",
                                    src.path, src.span(decl.path + ("steps", i, "params")))


def _is_sql_connector(project: Project, uses: str | None) -> bool:
    model = project.connector_model(uses) if uses else None
    return model is not None and model.type == "sql/execute"
