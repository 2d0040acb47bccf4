"""`a44 automation connectors list` and `a44 automation secrets set|list|rm`."""

from __future__ import annotations

import io
import json

from anthares44.automation.cli.main import main
from anthares44.automation.runtime.secrets.file import SecretFile
from anthares44.automation.runtime.secrets.source import SecretSource


def test_connectors_list_json_says_where_each_comes_from(capsys):
    assert main(["automation", "connectors", "list", "--format", "json"]) == 0
    rows = {r["uses"]: r for r in json.loads(capsys.readouterr().out)}
    for uses in ("pass", "http", "vpn/http", "sql/execute", "storage/put", "storage/get", "queue/publish",
                 "bot/invoke"):
        assert rows[uses]["source"].startswith("builtin") and ":" in rows[uses]["value"]
    assert "maxOutputTokens" in rows["bot/invoke"]["params"]
    assert main(["automation", "connectors", "list"]) == 0
    assert "vpn/http" in capsys.readouterr().out


def test_secrets_set_from_stdin_list_names_only_rm(tmp_path, monkeypatch, capsys, aio):
    monkeypatch.setenv("A44_HOME", str(tmp_path))
    monkeypatch.delenv("A44_SECRET_KEY", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("hunter2-value\n"))
    assert main(["automation", "secrets", "set", "sec_db"]) == 0
    assert aio(SecretSource(file=SecretFile(tmp_path))("sec_db")) == "hunter2-value"
    assert main(["automation", "secrets", "list", "-f", "json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == ["sec_db"] and "hunter2" not in out.out + out.err
    assert main(["automation", "secrets", "set", "not-a-ref"]) == 2
    assert main(["automation", "secrets", "rm", "sec_db"]) == 0
    assert main(["automation", "secrets", "rm", "sec_db"]) == 1
