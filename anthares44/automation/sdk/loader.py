"""Finding code workflows: importing a module by path (publish, and the daemon when it drives a run), listing
its `@workflow`s, building the IR of kind `code` that `publish` stores, and resolving that IR back to the
function (refusing a module whose function source no longer matches the published hash)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

from ..compiler.ir import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LEASE_MS,
    DEFAULT_QUEUE,
    RUN_DEADLINE_MS,
    CodeWorkflowIR,
    ConcurrencyIR,
    seal,
)
from ..errors import E_CODE_UNAVAILABLE, A44Error
from .core import WorkflowDef, duration_ms

_lock = threading.Lock()
_modules: dict[str, ModuleType] = {}


def import_path(path: str | Path) -> ModuleType:
    """Import a `.py` file once per process (its directory goes on sys.path, so its own imports work)."""
    p = str(Path(path).resolve())
    with _lock:
        mod = _modules.get(p)
        if mod is not None:
            return mod
        parent = str(Path(p).parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        name = "a44_code_" + hashlib.sha256(p.encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(name, p)
        if spec is None or spec.loader is None:
            raise A44Error(E_CODE_UNAVAILABLE, f"{p} is not a Python module")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise A44Error(E_CODE_UNAVAILABLE, f"importing {p} failed: {type(exc).__name__}: {exc}") from exc
        _modules[p] = mod
        return mod


def workflows_of(mod: ModuleType) -> dict[str, WorkflowDef]:
    """qualname (attribute name) -> WorkflowDef, for every @workflow at module level."""
    return {attr: v for attr, v in vars(mod).items() if isinstance(v, WorkflowDef)}


def deadline_ms(wf: WorkflowDef) -> int:
    """The run's deadline as the IR says it (ir.md): the shorter of `timeout` and `max_duration` (default 72 h)."""
    most = duration_ms(wf.max_duration) if wf.max_duration else RUN_DEADLINE_MS
    return min(duration_ms(wf.timeout), most) if wf.timeout else most


def code_ir(wf: WorkflowDef, module_path: str, attr: str):
    ir = CodeWorkflowIR(workflow_id=wf.workflow_id, name=wf.name, version=wf.version, queue=DEFAULT_QUEUE,
                        concurrency=ConcurrencyIR(max=DEFAULT_CONCURRENCY),
                        deadline_ms=deadline_ms(wf),
                        lease_ms=DEFAULT_LEASE_MS, triggers=(), nodes=(), edges=(),
                        code={"module": str(Path(module_path).resolve()), "qualname": attr,
                              "source_sha256": wf.source_sha256},
                        source={"file": str(module_path)})
    return seal(ir)


def resolve(ir) -> WorkflowDef:
    """The function a `code` IR names; E_CODE_UNAVAILABLE when it cannot be imported or its source changed."""
    code = ir.code or {}
    mod = import_path(code["module"])
    wf = getattr(mod, code["qualname"], None)
    if not isinstance(wf, WorkflowDef):
        raise A44Error(E_CODE_UNAVAILABLE, f"{code['module']} has no @workflow named {code['qualname']}")
    if wf.source_sha256 != code.get("source_sha256"):
        raise A44Error(E_CODE_UNAVAILABLE,
                       f"the source of {code['qualname']} in {code['module']} changed since {ir.workflow_id} "
                       f"v{ir.version} was published; a run only executes the code it started on",
                       hint="publish the change as a new version (bump version=) and keep the old module "
                            "deployed while its runs finish")
    return wf
