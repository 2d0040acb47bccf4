"""`step.patched("id")`: new code that keeps the runs recorded before a change on the old path (docs/verify.md).

The decision is the history's, so every visit and every replay of a run agrees:

- the history has the marker `ctx.patched:ID` (an earlier execution took the new path): True;
- the history has recorded steps after this point and no marker: the run went past it before the change existed,
  so False (the old path), and nothing is recorded;
- the history ends here (a new run, or a run whose recorded steps all come before this point): True, and the
  marker is recorded with the next commit, as `ctx.now()` values are, so the run stays on the new path.

Within one execution the first answer for an id is kept. Markers are ctx values: not steps, so they take no place
in the determinism check's step order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..attempts import Attempt

if TYPE_CHECKING:
    from .core import Execution

MARKER_PREFIX = "ctx.patched:"


def marker_id(patch_id: str) -> str:
    """The attempt row that records that a run took the new path of patch `patch_id`."""
    return MARKER_PREFIX + patch_id


def is_marker(step_id: str) -> bool:
    return step_id.startswith(MARKER_PREFIX)


def decide(x: Execution, patch_id: str) -> bool:
    """True: run the new code of patch `patch_id`; False: the run is replaying a history made before it."""
    if not isinstance(patch_id, str) or not patch_id.strip() or any(c in patch_id for c in "[]#"):
        raise ValueError(f"bad patch id {patch_id!r}: a non-empty string without '[', ']' or '#'")
    decided = x.patches.get(patch_id)
    if decided is not None:
        return decided
    key = marker_id(patch_id)
    log = x.history.steps.get(key)
    if log is not None and log.last is not None and log.last.status == "succeeded":
        taken = True
    elif x.position < len(x.history.sequence):     # recorded steps follow: made before the patch existed
        taken = False
    else:
        taken = True
        x.host.record_value(key, True)
        x.history.log(key).actions.append(Attempt(key, "action", 1, "succeeded", x.host.now(), result=True))
    x.patches[patch_id] = taken
    return taken
