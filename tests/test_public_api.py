"""The public Python API is `api.py`'s `__all__` (README "Python API", docs/cli.md): pinned here, so adding,
renaming or dropping a name is a deliberate edit of this list, never a side effect of a refactor."""

from __future__ import annotations

import anthares44.automation.api as api

PUBLIC = ["Automation", "RunHandle", "RunPage", "PublishReport", "PublishedWorkflow", "InvalidArgument",
          "CREATED", "UNCHANGED", "REFUSED", "DEFAULT_PROJECT", "MANUAL_TRIGGER", "E_INVALID_ARGUMENT",
          "parse_duration", "require_idempotency_key", "resolve_project", "workflow_ref"]


def test_the_public_names_are_the_pinned_list():
    assert list(api.__all__) == PUBLIC


def test_every_public_name_is_defined_and_star_import_gives_exactly_them():
    space: dict = {}
    exec("from anthares44.automation.api import *", space)
    assert sorted(k for k in space if k != "__builtins__") == sorted(PUBLIC)
    assert all(getattr(api, name, None) is not None for name in PUBLIC)


# the code-workflow SDK (`from anthares44.automation import workflow, step`, docs/code-workflows.md): `step`'s verbs
STEP_VERBS = ["map", "patched", "rows", "run", "sleep", "sleep_until", "workflow"]


def test_the_sdk_step_verbs_are_pinned_and_patched_is_typed():
    import inspect

    from anthares44.automation import step

    assert sorted(n for n in dir(step) if not n.startswith("_")) == STEP_VERBS
    sig = inspect.signature(step.patched)
    assert list(sig.parameters) == ["patch_id"] and sig.return_annotation in (bool, "bool")
