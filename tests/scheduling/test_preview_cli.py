"""`a44 automation schedule preview`: standalone trigger files and inline workflow crons, text and JSON, errors."""

from __future__ import annotations

import argparse
import json
import textwrap

import pytest

from anthares44.automation.cli import cmd_schedule

TRIGGERS = """\
- id: trg_lh_hourly
  type: schedule
  cron: "0 * * * *"
  tz: Australia/Lord_Howe
  workflow: wf_demo
  dstPolicy: run-once
- id: trg_lh_daily
  type: schedule
  cron: "45 1 * * *"
  tz: Australia/Lord_Howe
  workflow: wf_demo
  dstPolicy: run-twice
- id: trg_hook
  type: webhook
  workflow: wf_demo
"""

WORKFLOW = """\
name: nightly
version: 1
triggers:
  - { cron: "30 1 * * *", tz: America/New_York, dstPolicy: run-twice }
steps:
  - { id: nap, sleep: 1s }
"""


def run(capsys, *argv) -> tuple[int, str, str]:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="verb")
    cmd_schedule.add_parser(sub)
    code = cmd_schedule.run(p.parse_args(["schedule", *argv]))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def files(tmp_path):
    (tmp_path / "triggers.yaml").write_text(TRIGGERS)
    (tmp_path / "nightly.yaml").write_text(WORKFLOW)
    return tmp_path


def test_text_lists_shifted_firings(files, capsys):
    code, out, _ = run(capsys, "preview", str(files / "triggers.yaml"), "--trigger", "trg_lh_hourly",
                       "--from", "2026-10-04T00:00", "--to", "2026-10-04T04:00")
    assert code == 0
    assert "2026-10-03T15:30:00Z  2026-10-04T02:30:00+11:00  trg_lh_hourly:2026-10-04T02:30:00+11:00  " \
           "shifted (nominal 02:00 does not exist)" in out
    assert out.count("trg_lh_hourly:") == 4 and "trg_lh_daily" not in out


def test_json_fold_and_inline_workflow_trigger(files, capsys):
    code, out, _ = run(capsys, "preview", str(files), "--from", "2026-11-01T00:00:00-04:00",
                       "--to", "2026-11-02T00:00:00-05:00", "--format", "json")
    assert code == 0
    doc = {t["trigger_id"]: t for t in json.loads(out)["triggers"]}
    assert set(doc) == {"trg_lh_hourly", "trg_lh_daily", "trg_nightly_1"}   # webhook triggers are not listed
    inline = doc["trg_nightly_1"]["firings"]
    assert [(f["local"], f["second_instant"]) for f in inline] == [("2026-11-01T01:30:00-04:00", False),
                                                                     ("2026-11-01T01:30:00-05:00", True)]
    assert inline[1]["occurrence_key"] == "trg_nightly_1:2026-11-01T01:30:00-05:00"
    assert inline[1]["instant_utc"] == "2026-11-01T06:30:00Z"


def test_compile_error_is_reported_like_lint(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""\
        - id: trg_bad
          type: schedule
          cron: "61 2 * * *"
          tz: America/New_York
          workflow: wf_demo
        """))
    code, out, err = run(capsys, "preview", str(bad), "--from", "2026-01-01T00:00Z", "--to", "2026-01-02T00:00Z")
    assert code == 1 and "A44106" in out and "1 error" in err


def test_unknown_trigger(files, capsys):
    code, _, err = run(capsys, "preview", str(files / "triggers.yaml"), "--trigger", "trg_nope",
                       "--from", "2026-01-01T00:00Z", "--to", "2026-01-02T00:00Z")
    assert code == 1 and "E_TRIGGER_NOT_FOUND" in err
