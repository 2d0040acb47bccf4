"""The deploy verbs' command lines (docs/deploys.md): `versions WF` with options before or after it reads as
`versions list WF`; `versions retire WF V`; `runs migrate` takes repeated --from; `--format github` is refused
without --plan (exit 2)."""

from __future__ import annotations

import pytest

from anthares44.automation.cli.main import build_parser
from tests.cli_support import run_cli


@pytest.mark.parametrize("argv", [["versions", "wf_x"], ["versions", "--project", "p", "wf_x"],
                                  ["versions", "-f", "json", "wf_x"], ["versions", "wf_x", "--format", "json"],
                                  ["versions", "list", "wf_x"]])
def test_versions_wf_reads_as_versions_list(argv):
    args = build_parser().parse_args(["automation", *argv])
    assert (args.versions_action, args.workflow) == ("list", "wf_x")


def test_versions_retire_and_runs_migrate_parse():
    args = build_parser().parse_args(["automation", "versions", "retire", "wf_x", "3", "--migrate-to", "4"])
    assert (args.versions_action, args.workflow, args.version, args.migrate_to) == ("retire", "wf_x", 3, 4)
    args = build_parser().parse_args(["automation", "runs", "migrate", "--workflow", "x", "--to", "4", "--from", "2",
                                      "--from", "3", "--rate", "50/s", "--dry-run", "--allow-reexecute"])
    assert (args.runs_action, args.migrate_to, args.migrate_from, args.migrate_rate, args.dry_run,
            args.allow_reexecute) == ("migrate", 4, [2, 3], "50/s", True, True)


def test_github_format_without_plan_is_a_usage_error(capsys, tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("name: w\nversion: 1\nsteps:\n  - id: a\n    uses: pass\n    timeout: 1s\n")
    code, _, err = run_cli(capsys, "automation", "publish", str(f), "--format", "github")
    assert code == 2 and "--plan" in err
