"""Redaction of results before they are stored (§17)."""

from __future__ import annotations

from anthares44.automation.redact import REDACTED, is_sensitive, redact


def test_sensitive_keys_at_any_depth_case_insensitive():
    value = {"user": "ana", "Password": "p1", "nested": {"deeper": [{"api_key": "k1", "ok": 1}, {"TOKEN": "t"}]},
             "headers": {"Authorization": "Bearer x", "X-Api-Key": "k2", "content-type": "text/plain"},
             "auth": {"access_token": "a", "refreshToken": "r", "token_type": "bearer", "clientSecret": "c",
                      "secretRef": "sec_erp", "db_password": "d"}}
    out = redact(value)
    assert out == {"user": "ana", "Password": REDACTED,
                   "nested": {"deeper": [{"api_key": REDACTED, "ok": 1}, {"TOKEN": REDACTED}]},
                   "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "content-type": "text/plain"},
                   "auth": {"access_token": REDACTED, "refreshToken": REDACTED, "token_type": "bearer",
                            "clientSecret": REDACTED, "secretRef": "sec_erp", "db_password": REDACTED}}
    assert value["Password"] == "p1"  # the input is not modified


def test_whole_subtrees_and_scalars():
    assert redact({"secret": {"a": 1}}) == {"secret": REDACTED}
    assert redact([1, "token", None]) == [1, "token", None]  # values are never inspected, only keys
    assert redact("password") == "password"
    assert not is_sensitive(3) and not is_sensitive("password_changed_at") and is_sensitive("Set-Cookie")
