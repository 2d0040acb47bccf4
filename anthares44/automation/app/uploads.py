"""What a remote `publish` (and `publish --plan`) uploads (app/remote.py, app/remote_deploys.py): each local file's
text under a relative name safe for the server's discovery, and the way back from those names to the local ones
(the answer's diagnostics name uploaded files)."""

from __future__ import annotations

import os


def upload_texts(files: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """({uploaded name: text}, {uploaded name: local file name}) of `files`."""
    keys = _upload_keys(files)
    texts = {}
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            texts[keys[f]] = fh.read()
    return texts, {k: f for f, k in keys.items()}


def _upload_keys(files: list[str]) -> dict[str, str]:
    """Local file name -> the relative path it is uploaded under: relative to the files' common directory, every
    component safe for the server's discovery (no hidden or skipped directory, a YAML suffix)."""
    from ..compiler.lint import _SKIP_DIRS, YAML_SUFFIXES

    absolute = {f: os.path.abspath(f) for f in files}
    common = os.path.commonpath(list(absolute.values())) if absolute else ""
    if len(files) == 1 or os.path.isfile(common):
        common = os.path.dirname(common)
    keys: dict[str, str] = {}
    used: set[str] = set()
    for f, a in absolute.items():
        parts = os.path.relpath(a, common).split(os.sep)
        parts = [("_" + p) if (p.startswith(".") or p in _SKIP_DIRS) else p for p in parts]
        if not parts[-1].endswith(YAML_SUFFIXES):
            parts[-1] += ".yaml"
        key = "/".join(parts)
        n = 1
        while key in used:  # the same file named twice (relative and absolute): keep both, as local does
            n += 1
            key = "/".join(parts[:-1] + [f"{n}_{parts[-1]}"])
        used.add(key)
        keys[f] = key
    return keys
