"""Install a real (temporary) connector plugin distribution for a test: a module and a `*.dist-info` with
`entry_points.txt` in a directory put on sys.path, which importlib.metadata reads exactly as it reads a
pip-installed one. No entry point is faked."""

from __future__ import annotations

import secrets
import sys
import textwrap
from pathlib import Path

GROUP = "anthares44.automation.connectors"


def install_plugin(tmp_path: Path, monkeypatch, source: str, entry_points: dict[str, str],
                   dist: str = "a44-tmp-plugin", version: str = "0.1.0") -> str:
    """Write `source` as a fresh module and register `entry_points` (name -> attribute, or `!missing` for a
    module that does not exist). Returns the module name."""
    mod = f"a44_tmp_plugin_{secrets.token_hex(4)}"
    root = tmp_path / f"site-{mod}"
    root.mkdir()
    (root / f"{mod}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = [f"[{GROUP}]"]
    for name, target in entry_points.items():
        lines.append(f"{name} = {mod}_missing:thing" if target == "!missing" else f"{name} = {mod}:{target}")
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))  # the module vanishes with the test
    return mod
