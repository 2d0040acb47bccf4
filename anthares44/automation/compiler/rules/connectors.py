"""Connector rules (§3.7, §14): `uses`/`compensate` resolve, and parameters fit the connector's own model.

A reference that cannot be right (a misspelled built-in) is an error. A reference the linted files cannot
settle (a plugin not installed here, a `con_...` declared elsewhere) is a warning in lint, an error at publish.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostic, Severity, register
from ...suggestions import listing
from ..models import BUILTIN_PARAMS
from ..project import PLUGIN_GROUP
from ..resolve import PLUGIN_PREFIX, plugin_params_model, resolve
from ..validation import did_you_mean, validate

if TYPE_CHECKING:
    from ..documents import Decl
    from ..project import Project
    from ..source import Path, SourceFile

A44210 = register("A44210", "unknown connector")
A44211 = register("A44211", "reference cannot be settled from the linted files", Severity.WARNING)
A44212 = register("A44212", "parameters in the wrong place")
A44213 = register("A44213", "connector plugin failed to load")

# keys of the Step model itself; everything else on a step is a connector parameter
STEP_KEYS = {"id", "uses", "timeout", "retry", "compensate", "if", "needs", "exclusive", "sleep", "wait", "with",
             "description", "partitions", "onPartitionFailure"}


def unresolved(project: Project, code_path: Path, src: SourceFile, what: str, known: list[str], hint: str | None = None,
               name: str | None = None) -> Diagnostic:
    """`name`, when given, is offered a did-you-mean over `known` (a misspelt published queue, say)."""
    sev = Severity.ERROR if project.mode == "publish" else Severity.WARNING
    close = did_you_mean(name, known) if name else None
    shown = listing(known) if known else "none"
    where = f"the files {'published' if project.mode == 'publish' else 'linted'} here"
    if project.known.where:
        where += f" nor from those {project.known.where}"
    return Diagnostic.at(A44211, f"{what} cannot be settled from {where}; known: {shown}",
                         src.path, src.span(code_path), severity=sev,
                         hint=close or hint or ("publish the file that declares it first, or in the same call"
                                                if project.mode == "publish" else
                                                "publish refuses it until it exists; lint --strict fails on it"))


def _install_hint(uses: str) -> str:
    name = uses[len(PLUGIN_PREFIX):]
    return (f"pip install, in a44's environment, the distribution that registers entry point {name!r} in group "
            f"{PLUGIN_GROUP!r} (docs/connectors.md#writing-a-plugin); `a44 automation connectors` lists "
            "what is installed. publish refuses the step until then")


def check(project: Project) -> Iterator[Diagnostic]:
    for decl in project.of_kind("workflow"):
        for i, step in enumerate(decl.model.steps):
            if step.uses is None or step.uses.startswith("workflow/"):    # a child step: rules/children.py
                continue
            path = decl.path + ("steps", i)
            yield from _check_use(project, decl, path, step.uses, step.model_extra or {}, step.with_, "uses")
            comp = step.compensate
            if isinstance(comp, str):
                yield from _check_use(project, decl, path, comp, {}, None, "compensate")
            elif comp is not None:
                yield from _check_use(project, decl, path + ("compensate",), comp.uses, comp.model_extra or {},
                                      comp.with_, "uses")


def _check_use(project: Project, decl: Decl[Any], path: Path, uses: str, extra: dict[str, Any],
               with_: dict[str, Any] | None, key: str) -> Iterator[Diagnostic]:
    src = decl.src
    res = resolve(uses, project)
    at = path + (key,)
    if res.kind == "unknown":
        options = sorted(BUILTIN_PARAMS) + sorted(set(project.connectors) | set(project.known.connectors))
        hint = did_you_mean(uses, options) or ("plugins are written connector/<name>; built-ins are: " +
                                               ", ".join(sorted(BUILTIN_PARAMS)))
        yield Diagnostic.at(A44210, f"unknown connector {uses!r}", src.path, src.span(at), hint=hint)
        return
    if res.kind == "unresolved":
        if uses.startswith(PLUGIN_PREFIX):
            known = [PLUGIN_PREFIX + n for n in sorted(project.plugins)]
            yield unresolved(project, at, src, f"connector plugin {uses!r} is not installed on this machine and",
                             known, _install_hint(uses))
        else:
            yield unresolved(project, at, src, f"connector {uses!r} is not declared in these files and",
                             sorted(set(project.connectors) | set(project.known.connectors)), name=uses)
        return
    if res.kind == "plugin" or (res.kind == "unresolved" and uses.startswith(PLUGIN_PREFIX)):
        for k in extra:
            yield Diagnostic.at(A44212, f"{k!r} is not a step key; parameters of plugin {uses!r} go under 'with:'",
                                src.path, src.span(path + (k,), key=True), hint="move it under `with:`")
        model, err = plugin_params_model(uses, project)
        if err:
            yield Diagnostic.at(A44213, f"plugin {uses!r} failed to load: {err}", src.path, src.span(at))
        elif model is not None:
            _, diags = validate(src, model, with_ or {}, base=path + ("with",))
            yield from diags
        return
    # built-in or declared: parameters sit on the step
    if with_ is not None:
        yield Diagnostic.at(A44212, f"'with:' is for connector plugins; {uses!r} takes its parameters on the step",
                            src.path, src.span(path + ("with",), key=True),
                            hint="move the keys under `with:` up to the step")
    if res.params_model is not None:
        _, diags = validate(src, res.params_model, dict(extra), base=path)
        for d in diags:
            if d.code == "A44101":  # unknown key: offer step keys too in the hint
                key = d.message.split("'")[1] if "'" in d.message else ""
                fields = [f.alias or n for n, f in res.params_model.model_fields.items()]
                hint = did_you_mean(key, fields + sorted(STEP_KEYS))
                d = Diagnostic.at(d.code, f"unknown key {key!r} for a {res.type or uses} step; its parameters "
                                          f"are: {', '.join(fields)}", d.file,
                                  src.span(path + (key,), key=True), hint=hint)
            yield d
