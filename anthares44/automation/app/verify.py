"""`a44 automation verify FILE`: does the new version of a workflow still replay the runs it will meet?
(SPEC §23, docs/verify.md)

The histories come from a file (`runs export` JSON lines, or its `{"histories": [...]}` document as GET
/v1/automation/histories answers) or from the store (a random sample of the runs of FILE's workflows created
within `since`, open ones included: those are the runs the new code will pick up). Each history is checked
against FILE: a code workflow replays it with zero connector calls (sdk/replay_gate.py); a YAML workflow compares
the history's completed steps with the new IR (`yaml_divergence`). The report lists the first divergent step of
each run that diverges.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import E_BAD_INPUT, A44Error
from ..sdk.replay_gate import Replayed, history_of, parse, replay_history

DONE = ("succeeded", "skipped")     # attempt statuses of a step that counts as completed


@dataclass
class VerifyReport:
    file: str
    kind: str                                   # code | workflow
    workflows: list[str]
    checked: int = 0
    skipped: int = 0                            # histories of workflows FILE does not declare
    findings: list[Replayed] = field(default_factory=list)

    @property
    def divergent(self) -> int:
        return len(self.findings)

    def to_dict(self) -> dict[str, Any]:
        by_step = Counter(f.step or "-" for f in self.findings)
        return {"file": self.file, "kind": self.kind, "workflows": self.workflows, "checked": self.checked,
                "divergent": self.divergent, "skipped": self.skipped, "byStep": dict(sorted(by_step.items())),
                "findings": [f.to_dict() for f in self.findings]}


def bad(message: str, hint: str | None = None) -> A44Error:
    return A44Error(E_BAD_INPUT, message, hint=hint)


def read_histories(path: str) -> list[dict]:
    """The histories of a `runs export` file: JSON lines (one history a line, blank lines ignored) or one
    `{"histories": [...]}` document. E_BAD_INPUT naming the file and line for what cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise bad(f"cannot read {path}: {exc}") from None
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            whole = json.loads(stripped)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("histories"), list):
            return _checked(path, list(enumerate(whole["histories"], 1)))
    docs = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            docs.append((n, json.loads(line)))
        except ValueError as exc:
            raise bad(f"{path}:{n}: not a JSON line: {exc}",
                      hint="`a44 automation runs export --workflow WF > histories.jsonl` writes one a line") from None
    return _checked(path, docs)


def _checked(path: str, docs: list[tuple[int, Any]]) -> list[dict]:
    for n, doc in docs:
        try:
            history_of(parse(doc)[1])
        except ValueError as exc:
            raise bad(f"{path}:{n}: not a history: {exc}") from None
    return [doc for _, doc in docs]


async def histories_from_store(store, project: str, workflow_ids: list[str], *, since: timedelta,
                               sample: int) -> list[dict]:
    """Up to `sample` runs of each workflow created within `since`, in any state, as `runs export` writes them."""
    from ..runtime.store.core import RUN_STATES
    from .exports import export_runs

    out: list[dict] = []
    for wf in workflow_ids:
        out += [h async for h in export_runs(store, project, wf, since=since, sample=sample,
                                             states=tuple(RUN_STATES))]
    return out


def load_target(path: str) -> tuple[str, dict[str, Any]]:
    """('code', workflow id -> WorkflowDef) of a `.py` file, ('workflow', workflow id -> IR) of YAML files."""
    if not Path(path).exists():
        raise bad(f"{path} does not exist")
    if path.endswith(".py"):
        from ..sdk.loader import import_path, workflows_of

        try:
            found = workflows_of(import_path(path))
        except A44Error as err:
            raise bad(err.message, hint=err.hint) from None
        if not found:
            raise bad(f"{path} declares no @workflow")
        return "code", {wf.workflow_id: wf for wf in found.values()}
    from ..compiler.lint import lint_paths
    from ..diagnostics import Severity

    result = lint_paths([path], lower=True)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    if errors:
        raise bad(f"{path} does not compile: {errors[0].format()}", hint="`a44 automation lint` lists every problem")
    irs = {ir.workflow_id: ir for ir in result.irs.values() if hasattr(ir, "nodes") and ir.kind == "workflow"}
    if not irs:
        raise bad(f"{path} declares no workflow")
    return "workflow", irs


async def verify(path: str, histories: list[dict]) -> VerifyReport:
    kind, targets = load_target(path)
    report = VerifyReport(path, kind, sorted(targets))
    for doc in histories:
        run, attempts = parse(doc)
        target = targets.get(run.get("workflow_id") or "") or (next(iter(targets.values()))
                                                               if len(targets) == 1 and not run.get("workflow_id")
                                                               else None)
        if target is None:
            report.skipped += 1
            continue
        report.checked += 1
        got = await replay_history(target, doc) if kind == "code" else yaml_divergence(target, run, attempts)
        if got is not None and got.divergent:
            report.findings.append(got)
    return report


def yaml_divergence(ir, run: dict, attempts: list[dict]) -> Replayed | None:
    """The first completed step of a YAML run the new IR contradicts: removed, of another kind, or with a step
    the new IR puts before it (an ancestor) not completed before it in the history. Kept small and alone so the
    plan's classifier (`publish --plan`, SPEC §23) can replace it."""
    from ..runtime.engine.progress import split_part

    nodes = {n.id: n for n in ir.nodes}
    parents: dict[str, set[str]] = {}
    for a, b in ir.edges:
        parents.setdefault(b, set()).add(a)

    def ancestors(step: str) -> set[str]:
        seen, todo = set(), list(parents.get(step, ()))
        while todo:
            s = todo.pop()
            if s not in seen:
                seen.add(s)
                todo.extend(parents.get(s, ()))
        return seen

    done: list[str] = []
    for a in attempts:
        if a.get("kind", "action") != "action" or a["status"] not in DONE:
            continue
        sid = (split_part(a["step_id"]) or (a["step_id"], ""))[0]
        if sid not in done:
            done.append(sid)
    base: dict[str, Any] = {"run_id": str(run.get("run_id") or "?"), "workflow": str(run.get("workflow_id") or ir.workflow_id),
            "version": run.get("version"), "state": run.get("state"), "divergent": True}
    for i, sid in enumerate(done):
        node = nodes.get(sid)
        if node is None:
            return Replayed(**base, step=sid, position=i + 1, history_has=sid, code_asked=None,
                            message=f"step {sid!r} completed in the history; the new version has no such step")
        was = _recorded_kind(sid, attempts)
        if was is not None and was != node.kind:
            return Replayed(**base, step=sid, position=i + 1, history_has=sid, code_asked=sid,
                            message=f"step {sid!r} completed as a {was} step; the new version makes it a {node.kind}")
        missing = sorted(ancestors(sid) - set(done[:i]))
        if missing:
            return Replayed(**base, step=missing[0], position=i + 1, history_has=sid, code_asked=missing[0],
                            message=f"the new version runs {missing[0]!r} before {sid!r}, which the history "
                                    f"completed first")
    return None


def _recorded_kind(step_id: str, attempts: list[dict]) -> str | None:
    """What a history says of a step's kind: a sleep has its due instant, a child step's result says so."""
    for a in attempts:
        if a["step_id"] != step_id:
            continue
        if a.get("due_at"):
            return "sleep"
        result = a.get("result")
        if isinstance(result, dict) and result.get("kind") == "child":
            return "child"
    return None
