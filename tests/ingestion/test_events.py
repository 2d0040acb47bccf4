"""The event bus (§8): filters at ingestion, dropOnFilterMiss, maxAge -> DLQ, several triggers, dedupe."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.errors import A44Error
from anthares44.automation.runtime.ingestion.bus import publish_event
from anthares44.automation.runtime.ingestion.metrics import COUNTERS
from anthares44.automation.runtime.queues import dlq_list

from .support import P

T = "billing.refund.requested"


def outcomes(result):
    return {d["trigger_id"]: d["outcome"] for d in result.deliveries}


def test_filter_hit_creates_runs_per_trigger_with_event_and_trigger_ids(live, project):
    data = {"amountCents": 900000, "currency": "BRL", "refundId": "rf_1"}
    r = live.call(publish_event, P, T, data, "refund:rf_1:requested:v1", partition_key="cust_4471")
    assert r.created and r.event_id.startswith("evt_") and r.status == 202
    assert outcomes(r) == {"trg_refund_large": "created", "trg_refund_all": "created",
                           "trg_refund_kept": "filtered"}
    runs = {d["trigger_id"]: live.run(live.store.get_run(d["run_id"])) for d in r.deliveries if d["run_id"]}
    for tid, run in runs.items():
        assert run["trigger_id"] == tid and run["event_id"] == r.event_id and run["input"] == data
        assert run["workflow_id"] == "wf_refund" and run["partition_key"] == "cust_4471"
    assert len({run["run_id"] for run in runs.values()}) == 2
    assert COUNTERS.get("event_filter_miss_total", trigger="trg_refund_kept") == 1


def test_filter_miss_drops_without_a_run(live, project):
    before = live.counts()
    r = live.call(publish_event, P, T, {"amountCents": 10, "currency": "BRL"}, "refund:rf_2:requested:v1")
    assert outcomes(r) == {"trg_refund_large": "dropped", "trg_refund_all": "created",
                           "trg_refund_kept": "filtered"}
    after = live.counts()
    assert after["runs"] == before["runs"] + 1          # only trg_refund_all
    assert after["deliveries"] == before["deliveries"] + 2   # the dropped miss writes no row
    assert COUNTERS.get("event_filter_miss_total", trigger="trg_refund_large") == 1


def test_filter_that_cannot_read_the_event_is_a_miss(live, project):
    r = live.call(publish_event, P, T, {"other": True}, "refund:rf_3:requested:v1")
    assert outcomes(r)["trg_refund_large"] == "dropped"


def test_same_event_twice_is_one_run_per_trigger(live, project):
    data = {"amountCents": 900000, "currency": "BRL"}
    r1 = live.call(publish_event, P, T, data, "refund:rf_4:requested:v1")
    before = live.counts()
    r2 = live.call(publish_event, P, T, data, "refund:rf_4:requested:v1")
    assert not r2.created and r2.status == 200 and r2.event_id == r1.event_id
    assert {d["trigger_id"]: d["run_id"] for d in r2.deliveries if d["run_id"]} == \
        {d["trigger_id"]: d["run_id"] for d in r1.deliveries if d["run_id"]}
    assert live.counts() == before


def test_too_old_goes_to_the_dlq_byte_for_byte(live, project):
    old = (datetime.now(UTC) - timedelta(hours=7)).isoformat()
    data = {"amountCents": 900000, "currency": "BRL"}
    r = live.call(publish_event, P, T, data, "refund:rf_5:requested:v1", occurred_at=old)
    assert outcomes(r)["trg_refund_large"] == "dead_lettered"
    assert outcomes(r)["trg_refund_all"] == "created"    # no maxAge on that one
    (dl,) = live.call(dlq_list, P)
    assert dl["error_code"] == "E_EVENT_TOO_OLD" and dl["trigger_id"] == "trg_refund_large"
    ev = live.run(live.store.fetchrow("event_get", event_id=r.event_id, project=P))
    assert dl["envelope"] == ev["envelope"]
    env = json.loads(dl["envelope"])
    assert env["id"] == r.event_id and env["data"] == data and env["idempotency_key"] == "refund:rf_5:requested:v1"
    assert list(env) == ["id", "type", "idempotency_key", "partition_key", "occurred_at", "attempt", "data"]


@pytest.mark.parametrize("kwargs,code", [
    (dict(type="", data={}, idempotency_key="k"), "E_ENVELOPE_INVALID"),
    (dict(type=T, data={}, idempotency_key=""), "E_IDEMPOTENCY_KEY_REQUIRED"),
    (dict(type=T, data={"s": "a\x00b"}, idempotency_key="k"), "E_ENVELOPE_INVALID"),
    (dict(type=T, data={}, idempotency_key="k", occurred_at="yesterday"), "E_ENVELOPE_INVALID"),
])
def test_bad_events_are_refused_before_writing(live, project, kwargs, code):
    before = live.counts()
    with pytest.raises(A44Error) as e:
        live.call(publish_event, P, kwargs.pop("type"), kwargs.pop("data"), kwargs.pop("idempotency_key"), **kwargs)
    assert e.value.code == code
    assert live.counts() == before


def test_python_api(pg_url, project, aio):
    from anthares44.automation.api import Automation
    from anthares44.automation.app import Ingestion

    async def go():
        async with await Automation.connect(pg_url, project=P) as auto:
            return await Ingestion(auto).publish_event(T, {"amountCents": 1, "currency": "USD"}, "api:1")
    r = aio(go())
    assert outcomes(r) == {"trg_refund_large": "dropped", "trg_refund_all": "created", "trg_refund_kept": "created"}


def test_a_too_old_event_is_a_dead_letter_like_any_other(live, project, pg_url, monkeypatch, capsys):
    """One insert path, one id prefix, one CLI view: the bus's dead letter is a `dlq_` entry that `dlq list` and
    `dlq show` read like a queue's; `events dlq` is gone."""
    from anthares44.automation.cli.main import main

    old = (datetime.now(UTC) - timedelta(hours=7)).isoformat()
    r = live.call(publish_event, P, T, {"amountCents": 900000, "currency": "BRL"}, "refund:rf_9:v1", occurred_at=old)
    (dl,) = live.call(dlq_list, P)
    assert dl["dead_letter_id"].startswith("dlq_") and dl["event_id"] == r.event_id
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    capsys.readouterr()
    assert main(["automation", "dlq", "list", "--project", P, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["dead_letters"]
    assert [(d["dead_letter_id"], d["error_code"]) for d in listed] == [(dl["dead_letter_id"], "E_EVENT_TOO_OLD")]
    assert main(["automation", "dlq", "list", "--project", P]) == 0
    assert dl["dead_letter_id"] in capsys.readouterr().out
    assert main(["automation", "dlq", "show", dl["dead_letter_id"], "--project", P, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["error_code"] == "E_EVENT_TOO_OLD" and json.loads(shown["envelope"])["id"] == r.event_id
    with pytest.raises(SystemExit) as exc:
        main(["automation", "events", "dlq", "--project", P])
    assert exc.value.code == 2
