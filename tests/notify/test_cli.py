"""`a44 monitor channel ...` and `a44 monitor notifications ...` end to end (in-process `main`, the test's
database, loopback receivers): coded errors with did-you-mean, create/list/show/rm, `channel test` printing the
outcome, the failed list and `retry`."""

from __future__ import annotations

import json

import pytest

from anthares44.automation.cli.main import main
from tests.notify.conftest import SECRET
from tests.notify.receivers import HttpReceiver


@pytest.fixture
def cli(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("A44_DATABASE_URL", pg_url)
    monkeypatch.setenv("A44_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("A44_SECRET_SEC_HOOK", SECRET)
    monkeypatch.setenv("A44_NOTIFY_TIMEOUT", "2s")

    def run(*argv):
        capsys.readouterr()
        code = main(["monitor", *argv])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def test_mistakes_are_coded_errors_with_did_you_mean(cli):
    code, _, err = cli("channel", "create", "--name", "x", "--type", "slak", "--url", "https://h.example/a")
    assert code == 2 and "E_CHANNEL_INVALID unknown channel type 'slak'" in err and "did you mean slack?" in err
    code, _, err = cli("channel", "create", "--name", "x", "--type", "slack", "--url", "htps://h.example/a")
    assert code == 2 and "E_CHANNEL_INVALID" in err and "did you mean https://h.example/a?" in err
    code, _, err = cli("channel", "create", "--name", "x", "--type", "webhook", "--url", "https://u:p@h.example/",
                       "--secret-ref", "sec_hook")
    assert code == 2 and "may not carry a user or password" in err
    code, _, err = cli("channel", "create", "--name", "x", "--type", "webhook", "--url", "https://h.example/",
                       "--secret-ref", "sec_hok")
    assert code == 1 and "E_SECRET_NOT_FOUND secret sec_hok is not defined" in err and "traceback" not in err.lower()
    code, _, err = cli("channel", "create", "--name", "x", "--type", "email", "--from", "a44@example.com",
                       "--to", "not-an-address", "--smtp-host", "mail.example.com")
    assert code == 2 and "'not-an-address' is not an email address" in err
    code, _, _ = cli("channel", "create", "--name", "squad-billing", "--type", "webhook", "--url",
                     "https://h.example/", "--secret-ref", "sec_hook")
    assert code == 0
    code, _, err = cli("channel", "show", "squad-biling")
    assert code == 1 and "E_CHANNEL_NOT_FOUND" in err and "did you mean squad-billing?" in err
    code, _, err = cli("channel", "create", "--name", "squad-billing", "--type", "slack", "--url", "https://h.example/")
    assert code == 1 and "E_CHANNEL_EXISTS" in err
    code, _, err = cli("notifications", "--state", "faild")
    assert code == 2 and "did you mean failed?" in err
    code, _, err = cli("notifications", "retry", "999")
    assert code == 1 and "E_NOTIFICATION_NOT_FOUND" in err


def test_create_list_show_test_rm(cli):
    hook = HttpReceiver(secret=SECRET)
    slack = HttpReceiver()
    try:
        assert cli("channel", "create", "--name", "squad-billing", "--type", "webhook", "--url", hook.hook,
                   "--secret-ref", "sec_hook")[0] == 0
        assert cli("channel", "create", "--name", "oncall", "--type", "slack", "--url",
                   slack.hook + "?token=T0/B0/XYZ")[0] == 0
        code, out, _ = cli("channel", "list", "--format", "json")
        chans = {c["name"]: c for c in json.loads(out)["channels"]}
        assert chans["squad-billing"]["config"] == {"url": hook.hook, "secretRef": "sec_hook"}
        assert "XYZ" not in out and chans["oncall"]["config"]["url"].endswith("/…")   # a Slack URL is a credential
        code, out, _ = cli("channel", "test", "squad-billing")
        assert code == 0 and "delivered to squad-billing" in out
        [req] = hook.requests
        assert req["verified"] and json.loads(req["body"])["kind"] == "test"
        code, out, _ = cli("notifications", "--format", "json")
        [n] = json.loads(out)["notifications"]
        assert n["state"] == "delivered" and n["kind"] == "test" and n["channel"] == "squad-billing"
        code, _, err = cli("notifications", "retry", str(n["id"]))
        assert code == 1 and "E_NOTIFICATION_DELIVERED" in err
        assert cli("channel", "rm", "oncall")[0] == 0
        assert cli("channel", "rm", "oncall")[0] == 1
    finally:
        hook.close()
        slack.close()


def test_a_failing_channel_test_says_why_then_failed_list_and_retry(cli):
    gone = HttpReceiver(script=[410, 200])
    try:
        assert cli("channel", "create", "--name", "gone", "--type", "slack", "--url", gone.hook)[0] == 0
        code, out, _ = cli("channel", "test", "gone")
        assert code == 1 and "NOT delivered (failed, attempt 1)" in out and "HTTP 410" in out
        assert "a44 monitor notifications retry" in out
        code, out, _ = cli("notifications", "--state", "failed")
        assert code == 0 and "gone" in out and "FAILED" not in out and "failed" in out
        nid = int(out.splitlines()[1].split()[0])
        code, out, _ = cli("notifications", "retry", str(nid))
        assert code == 0 and "pending again" in out
        code, out, _ = cli("notifications", "show", str(nid))
        doc = json.loads(out)
        assert doc["state"] == "pending" and doc["attempts"] == 0
    finally:
        gone.close()


def test_serve_refuses_bad_delivery_settings_before_it_starts(monkeypatch, capsys):
    monkeypatch.setenv("A44_NOTIFY_MAX_ATTEMPTS", "0")
    assert main(["automation", "serve"]) == 2
    assert "A44_NOTIFY_MAX_ATTEMPTS must be at least 1" in capsys.readouterr().err
    monkeypatch.setenv("A44_NOTIFY_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("A44_NOTIFY_RETRY_BASE", "soon")
    assert main(["automation", "serve"]) == 2
    assert "A44_NOTIFY_RETRY_BASE" in capsys.readouterr().err
