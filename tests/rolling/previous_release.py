"""The previous release of a44, the one today's daemon must serve beside during a rolling upgrade
(tests/rolling/test_mixed_versions.py, docs/store.md "Rolling upgrades"): the one place that names it, and how it
is built: `git archive` of that commit into a directory, installed (not editable) into a venv of its own whose
dependencies come from the running interpreter's site-packages through a `.pth` line (the same versions, no
index), so only the package itself differs. Run its interpreter outside the repository (`python -c` puts the working
directory first on sys.path, which would import today's package). Raise COMMIT with each release."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

COMMIT = "5f787a05cb513590625a6cce0b9b2a6ad3b591f9"   # main before the rolling-upgrade work: daemon schema 42
SCHEMA = 42                                             # the newest migration that release ships
REPO = Path(__file__).resolve().parents[2]


def available() -> str | None:
    """Why the release cannot be built here (no git, or no history holding COMMIT), else None."""
    try:
        done = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{COMMIT}^{{commit}}"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"git is not available: {exc}"
    if done.returncode != 0:
        return f"the git history here does not hold the previous release {COMMIT[:12]} (a shallow clone?)"
    return None


def cache_dir() -> Path:
    """Where the built release is kept across test sessions: per commit and per interpreter whose dependencies it
    borrows (A44_TEST_RELEASE_CACHE overrides the directory above it)."""
    base = Path(os.environ.get("A44_TEST_RELEASE_CACHE") or tempfile.gettempdir())
    owner = hashlib.sha256(sys.prefix.encode()).hexdigest()[:10]
    return base / f"a44-release-{COMMIT[:12]}-{owner}"


def build(root: Path) -> Path:
    """The previous release's `a44` executable in a venv under `root`: built once, under a lock file (two sessions
    building at once make one), marked whole only when done (a build cut short is made again), reused after."""
    a44, done = root / "venv" / "bin" / "a44", root / "built"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            _build(root)
            done.write_text(COMMIT + "\n")
    return a44


def _build(root: Path) -> None:
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", COMMIT], capture_output=True, check=True,
                             timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(site, "a44_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(src)], check=True, timeout=600,
                   capture_output=True)
    where = subprocess.run([str(python), "-c", "import anthares44.automation as a; print(a.__file__)"],
                           capture_output=True, text=True, check=True, timeout=60, cwd=root).stdout
    assert where.startswith(site), f"the previous release imports today's package: {where}"
