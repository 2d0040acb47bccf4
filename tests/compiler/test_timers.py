"""Durable timers in the compiler (§19): `maxDuration`, `sleep: {for, tz, dstPolicy}` and `sleep: {until}` lowered
into the IR the runtime reads, while the IR (and so the sha256 published versions are compared by) of every
workflow that does not use them stays byte for byte what it was. The diagnostics themselves are golden cases
(golden/A44214, A44215, A44216)."""

from __future__ import annotations

from datetime import datetime

import pytest

from anthares44.automation.calendar import Span, due_for, parse_instant
from anthares44.automation.compiler import ir as irmod
from anthares44.automation.compiler.lint import compile_sources
from anthares44.automation.compiler.source import load_text
from anthares44.automation.diagnostics import Severity
from tests.seed_texts import SEED_WORKFLOW

DAY = 86_400_000


def compiled(text: str, mode: str = "lint"):
    res = compile_sources([load_text(text, "w.yaml")], mode, lower=True)
    return [v for v in res.irs.values() if isinstance(v, irmod.WorkflowIR)], res.diagnostics


def one(text: str) -> irmod.WorkflowIR:
    irs, diags = compiled(text)
    assert not [d for d in diags if d.severity is Severity.ERROR], [d.format() for d in diags]
    return irs[0]


def wf(steps: str, head: str = "") -> str:
    return f"name: timers\nversion: 1\n{head}steps:\n{steps}"


# the sha256 of these definitions as the compiler before §19 computed them (published versions compare by it)
BEFORE = {
    "seed": (SEED_WORKFLOW, "820b31dabebcd6176f3f68af6b24235954d744bce2b28696e59fda639591718a"),
    "sleepy": ("name: sleepy\nversion: 3\ntimeout: 48h\nsteps:\n  - id: a\n    uses: pass\n    timeout: 72h\n"
               "  - id: cooldown\n    sleep: 72h\n",
               "f8ba005639e73d2159516ae8a9ee5d8eab1c808e43107aa7845ea4ab6c71077f"),
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_workflows_without_the_new_forms_keep_their_sha256(name):
    text, sha = BEFORE[name]
    ir = one(text)
    assert ir.sha256 == sha
    doc = irmod.to_json(ir)
    assert all("sleep" not in n for n in doc["nodes"])


def test_max_duration_is_the_run_deadline_and_a_shorter_timeout_still_wins():
    assert one(wf("  - id: s\n    sleep: 30d\n", "maxDuration: 40d\n")).deadline_ms == 40 * DAY
    assert one(wf("  - id: s\n    sleep: 1d\n", "maxDuration: 40d\ntimeout: 2d\n")).deadline_ms == 2 * DAY
    assert one(wf("  - id: s\n    sleep: 1d\n")).deadline_ms == irmod.RUN_DEADLINE_MS


def test_a_duration_sleep_past_72h_lowers_to_sleep_ms_when_max_duration_allows():
    node = one(wf("  - id: s\n    sleep: 30d\n", "maxDuration: 30d\n")).node("s")
    assert (node.kind, node.sleep_ms, node.sleep) == ("sleep", 30 * DAY, None)


def test_a_calendar_span_lowers_with_every_default_resolved():
    node = one(wf("  - id: s\n    sleep: {for: 1mo, tz: America/Sao_Paulo}\n", "maxDuration: 32d\n")).node("s")
    assert node.kind == "sleep" and node.sleep_ms is None
    assert node.sleep == irmod.SleepIR(kind="for", months=1, days=0, ms=0, tz="America/Sao_Paulo",
                                       dst_policy="skip-nonexistent")
    # what the runtime will do with it when the sleep opens: 31 Jan 10:00 + 1mo = 28 Feb 10:00, Sao Paulo time
    s = node.sleep
    due = due_for(datetime.fromisoformat("2026-01-31T10:00:00-03:00"), Span(s.months, s.days, s.ms), s.tz,
                  s.dst_policy)
    assert due.isoformat() == "2026-02-28T13:00:00+00:00"


@pytest.mark.parametrize("block, sleep_ms", [
    ("{for: 90m}", 90 * 60_000), ("{for: 2d}", 2 * DAY), ("{for: 1w1d, tz: UTC}", 8 * DAY),
    ("{for: 36h, tz: Europe/Berlin}", 36 * 3_600_000),
])
def test_a_span_of_the_same_length_in_every_zone_stays_a_plain_sleep_ms(block, sleep_ms):
    node = one(wf(f"  - id: s\n    sleep: {block}\n", "maxDuration: 10d\n")).node("s")
    assert (node.sleep_ms, node.sleep) == (sleep_ms, None)


def test_days_in_a_zone_with_dst_and_mixed_spans_keep_their_parts():
    node = one(wf("  - id: s\n    sleep: {for: 1y2w3d12h, tz: Europe/Berlin, dstPolicy: run-twice}\n",
                  "maxDuration: 400d\n")).node("s")
    assert node.sleep == irmod.SleepIR(kind="for", months=12, days=17, ms=12 * 3_600_000, tz="Europe/Berlin",
                                       dst_policy="run-twice")
    # two days in Berlin are 47, 48 or 49 hours: the calendar decides when the sleep opens
    node = one(wf("  - id: s\n    sleep: {for: 2d, tz: Europe/Berlin}\n", "maxDuration: 10d\n")).node("s")
    assert (node.sleep_ms, node.sleep.days, node.sleep.tz) == (None, 2, "Europe/Berlin")


def test_until_lowers_static_instants_parsed_and_templates_marked():
    ir = one(wf('  - id: a\n    sleep: {until: "2026-07-01T12:00:00Z"}\n'
                '  - id: b\n    sleep: {until: "{{ input.renewsAt }}"}\n'))
    assert ir.node("a").sleep == irmod.SleepIR(kind="until", until="2026-07-01T12:00:00+00:00")
    assert parse_instant(ir.node("a").sleep.until).isoformat() == "2026-07-01T12:00:00+00:00"
    assert ir.node("b").sleep == irmod.SleepIR(kind="until", until={"$tpl": "{{ input.renewsAt }}"})
    assert (ir.node("a").sleep_ms, ir.node("b").sleep_ms) == (None, None)


def test_the_new_forms_round_trip_through_stored_json_with_their_hash():
    ir = one(wf('  - id: a\n    sleep: {for: 1mo, tz: America/New_York}\n'
                '  - id: b\n    sleep: {until: "{{ input.at }}"}\n', "maxDuration: 40d\n"))
    doc = irmod.to_json(ir)
    assert doc["nodes"][1]["sleep"] == {"kind": "until", "until": {"$tpl": "{{ input.at }}"}}
    back = irmod.load_workflow_ir(doc)
    assert back == ir and irmod.seal(back).sha256 == ir.sha256


def test_the_hash_follows_the_span_zone_and_policy():
    base = wf("  - id: s\n    sleep: {for: 1mo, tz: America/New_York}\n", "maxDuration: 40d\n")
    shas = {one(t).sha256 for t in (base, base.replace("1mo", "1mo1d"), base.replace("New_York", "Chicago"),
                                    base.replace("}\n", ", dstPolicy: run-twice}\n"))}
    assert len(shas) == 4


def test_publish_refuses_a_sleep_that_cannot_fit_and_names_the_step():
    irs, diags = compiled(wf("  - id: settle\n    sleep: {for: 1mo, tz: America/Sao_Paulo}\n"), "publish")
    assert irs == []
    [d] = [d for d in diags if d.severity is Severity.ERROR]
    assert d.code == "A44214" and "'settle'" in d.message and "72h" in d.message


def test_a_templated_until_is_not_judged_at_compile_time_but_its_template_is():
    _irs, diags = compiled(wf('  - id: s\n    sleep: {until: "{{ steps.later.result }}"}\n'
                              "  - id: later\n    uses: pass\n    timeout: 1s\n"))
    assert [d.code for d in diags] == ["A44402"]


def test_the_examples_of_docs_timers_md_compile_clean():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "timers.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    assert len(blocks) >= 2
    for text in blocks:
        irs, diags = compiled(text, "publish")
        assert not diags and len(irs) == 1, [d.format() for d in diags]
