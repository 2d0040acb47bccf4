"""Semantic rules: one module per concern, each with its own stable codes, all run over the whole project.

A rule is a module exposing `check(project) -> Iterable[Diagnostic]`. Rules never raise for user input: a
declaration whose model failed validation is skipped (its shape errors are already reported).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic
from . import (
    approvals,
    children,
    connectors,
    dag,
    deploys,
    expectations,
    expressions,
    flow,
    flow_buffers,
    flow_limits,
    monitoring,
    retry,
    sql,
    steps,
    templates,
    timers,
    triggers,
    waits,
)

if TYPE_CHECKING:
    from ..project import Project

RULES = (steps, connectors, children, dag, retry, timers, flow, flow_limits, flow_buffers, expressions, expectations,
         templates, sql, triggers, monitoring, approvals, waits, deploys)


def run_rules(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for rule in RULES:
        out.extend(rule.check(project))
    return out
