"""`lint` settles references against the project's files (issue 15 item 4), offline: the `paths` of
`a44.toml` or `pyproject.toml [tool.a44]`, or the whole `--project-dir`. Only the files named on the command
line are reported on; the project's other files only settle what they declare. Lint still imports neither
asyncpg nor aiohttp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from golden_support import GOLDEN, run_lint

PROJECT = GOLDEN / "A44903" / "A44903_ok"          # pyproject.toml [tool.a44] paths = on-queue.yaml, orders.yaml
WORKFLOW = "workflows/on-queue.yaml"
SOURCE = "on-queue.yaml"


def make_project(tmp_path: Path, config: str | None) -> Path:
    (tmp_path / "workflows").mkdir()
    (tmp_path / "queues").mkdir()
    (tmp_path / WORKFLOW).write_text((PROJECT / SOURCE).read_text())
    (tmp_path / "queues" / "orders.yaml").write_text("id: q_orders\nmaxConcurrency: 4\n")
    (tmp_path / "queues" / "broken.yaml").write_text("id: q_broken\nmaxConcurrency: many\n")
    if config is not None:
        (tmp_path / "a44.toml").write_text(config)
    return tmp_path


def test_a_file_alone_settles_its_queue_against_the_files_a44_toml_lists(tmp_path):
    project = make_project(tmp_path, None)
    out, _err, code = run_lint(project, [WORKFLOW])
    assert "A44211" in out and "'q_orders'" in out and code == 0      # without a config: unsettled
    (project / "a44.toml").write_text('paths = ["workflows/", "queues/"]\n')
    out, _err, code = run_lint(project, [WORKFLOW])
    # settled by queues/orders.yaml; the broken queue file is the project's, not linted here: not reported
    assert (out, code) == ("", 0)


def test_pyproject_tool_a44_is_read_too():
    out, _err, code = run_lint(PROJECT, [SOURCE])
    assert (out, code) == ("", 0)


def test_project_dir_without_a_config_is_the_whole_directory(tmp_path):
    (tmp_path / "p").mkdir()
    make_project(tmp_path / "p", None)
    out, _err, code = run_lint(tmp_path, ["--project-dir", "p", f"p/{WORKFLOW}"])
    assert (out, code) == ("", 0), out
    # with no PATH, the project's paths are what is linted: the broken queue file is reported then
    out, _err, code = run_lint(tmp_path, ["--project-dir", "p"])
    assert code == 1 and "p/queues/broken.yaml:2:17: error A44103" in out and "A44211" not in out


def test_lint_with_a_project_imports_no_database_or_http_client():
    code = ("import sys, os; os.chdir(sys.argv[1]); from anthares44.automation.cli.main import main; "
            f"rc = main(['automation', 'lint', '{SOURCE}']); "
            "print(rc, [n for n in ('asyncpg', 'aiohttp') if n in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code, str(PROJECT)], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "0 []\n", proc.stdout + proc.stderr       # clean (settled), and nothing heavy
