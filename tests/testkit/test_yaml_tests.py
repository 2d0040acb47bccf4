"""Declarative tests (`*.a44test.yaml`): the shipped example passes, a wrong expectation fails with its reason
in text and JUnit XML, and the `a44 automation test` verb runs them with its exit codes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from anthares44.automation.testkit.yaml_tests import junit_report, run_paths, text_report

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "testkit"
GOLDEN = Path(__file__).parent / "data" / "example_report.txt"


def normalized(report: str) -> str:
    """The text report without what changes from run to run: wall seconds and the absolute path."""
    return re.sub(r"\(\d+\.\d\ds wall", "(N.NNs wall", report).replace(str(ROOT) + os.sep, "")


def test_the_shipped_example_passes_and_reports_as_the_golden_file(a44_postgres):
    results = run_paths([str(EXAMPLE)], a44_postgres)
    assert [r.passed for r in results] == [True, True], text_report(results)
    assert normalized(text_report(results)) == GOLDEN.read_text(encoding="utf-8")


def test_a_wrong_expectation_fails_with_what_was_expected_and_what_happened(a44_postgres, tmp_path):
    for name in ("payments.yaml", "charge-order.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    text = (EXAMPLE / "charge-order.a44test.yaml").read_text(encoding="utf-8")
    # the first case now claims the payments API is called 5 times and the run fails
    text = text.replace("      state: succeeded\n", "      state: failed\n", 1).replace("          - { attempt: 6 }\n", "", 1)
    (tmp_path / "charge-order.a44test.yaml").write_text(text, encoding="utf-8")

    results = run_paths([str(tmp_path)], a44_postgres)

    assert [r.passed for r in results] == [False, True]
    assert results[0].failures == ["state: expected failed, got succeeded",
                                   "calls of con_payments: expected 5, got 6"]
    suite = ElementTree.fromstring(junit_report(results).split("\n", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    failure = suite.find("testcase/failure")
    assert failure.get("message") == "state: expected failed, got succeeded"


def test_a_file_that_is_not_a_test_is_an_error_entry_and_the_others_still_run(a44_postgres, tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "ok")
    (tmp_path / "broken.a44test.yaml").write_text("tests:\n  - name: x\n    expct: {state: succeeded}\n")
    results = run_paths([str(tmp_path)], a44_postgres)
    assert [(Path(r.file).name, r.passed) for r in results] == [
        ("broken.a44test.yaml", False), ("charge-order.a44test.yaml", True), ("charge-order.a44test.yaml", True)]
    assert "unknown key(s) in case 'x': expct" in results[0].error


def a44(*args, cwd=ROOT):
    exe = shutil.which("a44", path=os.path.dirname(sys.executable)) or shutil.which("a44")
    return subprocess.run([exe, "automation", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_verb_writes_junit_and_exits_0_when_all_pass_and_2_without_test_files(tmp_path):
    out = tmp_path / "report.xml"
    proc = a44("test", "examples/testkit", "--format", "junit", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "2 passed, 0 failed"
    assert ElementTree.parse(out).getroot().get("tests") == "2"
    empty = a44("test", str(tmp_path))
    assert empty.returncode == 2
    assert "no *.a44test.yaml file under" in empty.stderr
