"""Every `A44_*` environment variable, declared once with its meaning, and `Settings`: their values, read once.

The edges read the environment (`Settings.from_env()` in the CLI's `main`, or a caller of the Python API) and hand
values down; a module below them takes a value as an argument instead of looking the variable up, and nothing
reads the environment when it is imported. `docs/settings.md` is generated from `VARIABLES`:
`python -m anthares44.automation.settings > docs/settings.md` (tests/test_settings.py keeps it true).

`A44_SECRET_<REF>` is the one family: a workflow names its secret references, so the variable to read is known
only when a step asks for one (runtime/secrets/source.py looks it up by name then, at run time, never at import).

A small frozen dataclass rather than pydantic-settings: the CLI reads this on every verb, `lint` included, which
must start fast; the parsing it needs is four integers, a float and a flag.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Variable:
    name: str
    field: str
    doc: str
    kind: type = str             # str, int, float or bool


VARIABLES: tuple[Variable, ...] = (
    Variable("A44_PROJECT", "project", "the project of a verb without `--project` (else `pj_default`)"),
    Variable("A44_DATABASE_URL", "database_url",
             "the control store (PostgreSQL URL); unset: the embedded server under `$A44_HOME` (docs/store.md)"),
    Variable("A44_DATABASE_SESSION_URL", "database_session_url",
             "a connection to the control store that bypasses a transaction pooler (PgBouncer pool_mode=transaction) "
             "for what needs one server session: LISTEN/NOTIFY and the migration and retention locks; without a "
             "database it takes A44_DATABASE_URL's; unset: A44_DATABASE_URL itself, refused (E_DB_POOLER) when that "
             "is transaction pooled (docs/store.md)"),
    Variable("A44_APP_DATABASE_URL", "app_database_url",
             "where workflow SQL (`sql/execute`) runs: a URL with `{project}`, a database per project; unset: the "
             "embedded server's database of each project, never the control store (docs/store.md)"),
    Variable("A44_HOME", "home", "the a44 directory: embedded database, credentials, secrets, networks.json "
                                 "(default `~/.a44`)"),
    Variable("A44_API_URL", "api_url", "a daemon's REST API for the runtime verbs' remote mode (docs/cli.md)"),
    Variable("A44_API_TOKEN", "api_token", "the API token of remote mode, instead of a stored `a44 auth login`"),
    Variable("A44_WORKER_ID", "worker_id", "`serve`: the worker's name in leases and attempts (default "
                                           "host:pid:random)"),
    Variable("A44_CONCURRENCY", "concurrency", "`serve`: runs in flight in one daemon (default 16)", int),
    Variable("A44_LEASE_TIMEOUT", "lease_timeout", "`serve`: the lease per run, a duration (default 30s)"),
    Variable("A44_SYNCHRONOUS_COMMIT", "synchronous_commit",
             "`serve`: `off` commits step transitions without waiting for their WAL flush: a crash of PostgreSQL "
             "(not of a44) may lose the last few hundred ms of transitions (default `on`, docs/runtime.md)"),
    Variable("A44_WEBHOOK_MAX_BATCH", "webhook_max_batch",
             "webhook writes grouped into one commit at most (default 128, docs/webhooks.md)", int),
    Variable("A44_WEBHOOK_FLUSHERS", "webhook_flushers", "webhook write batches in flight at most (default 2)", int),
    Variable("A44_WEBHOOK_CACHE_TTL", "webhook_cache_ttl",
             "seconds a process caches a webhook trigger and its secrets (default 2)", float),
    Variable("A44_ALERT_INTERVAL", "alert_interval",
             "`serve`: how often the alert evaluator samples the metrics and evaluates the rules, a duration "
             "(default 15s; `off`: this daemon never evaluates, docs/alerts.md)"),
    Variable("A44_PUBLIC_URL", "public_url",
             "`serve`: the address people reach this daemon's HTTP plane at (e.g. `https://a44.example.com`); approval "
             "messages carry their one-click links under it (http or https only; unset: the links carry their path "
             "`/approvals/links/...` only, docs/approvals.md)"),
    Variable("A44_TRACE_URL", "trace_url",
             "`serve`: the URL of a trace in your tracing UI, with `{trace_id}` where its id goes (e.g. "
             "`http://127.0.0.1:16686/trace/{trace_id}` for Jaeger); the console links each run's trace id to it "
             "(http or https only; unset: the id is shown, not linked)"),
    Variable("A44_SECRET_KEY", "secret_key", "the key of `$A44_HOME/secrets.json` (hex, 32 bytes or more); unset: "
                                             "`$A44_HOME/secret.key`"),
    Variable("A44_NETWORKS_FILE", "networks_file", "the private networks file (default `$A44_HOME/networks.json`)"),
    Variable("A44_PG_SYSTEM_USER", "pg_system_user",
             "the operating-system user the embedded PostgreSQL runs as when a44 runs as root"),
    Variable("A44_NOTIFY_RETRY_BASE", "notify_retry_base",
             "`serve`: the first delay before a notification is sent again, a duration (default 5s; doubles each "
             "time, with jitter, docs/notifications.md)"),
    Variable("A44_NOTIFY_RETRY_MAX", "notify_retry_max", "`serve`: the longest delay between two sends of a "
                                                         "notification (default 15m)"),
    Variable("A44_NOTIFY_MAX_ATTEMPTS", "notify_max_attempts",
             "`serve`: sends of a notification before it is marked `failed` (default 12)", int),
    Variable("A44_NOTIFY_TIMEOUT", "notify_timeout", "`serve`: how long one send of a notification may take "
                                                     "(default 10s)"),
    Variable("A44_LOG_HOT_DAYS", "log_hot_days",
             "days step attempts stay in PostgreSQL before they are archived and their month dropped (default 30)",
             int),
    Variable("A44_LOG_ARCHIVE_MONTHS", "log_archive_months",
             "months the Parquet log archive keeps a day before deleting it (default 13)", int),
    Variable("A44_LOG_ARCHIVE_DIR", "log_archive_dir",
             "the directory of the Parquet log archive (default `$A44_HOME/storage/logs`)"),
    Variable("A44_TEST_DATABASE_URL", "test_database_url",
             "the test kit (and this repository's tests): a maintenance database URL (`.../postgres`) of a "
             "PostgreSQL >= 15 to make test databases on, instead of an embedded server (docs/testkit.md)"),
    Variable("A44_TEST_POSTGRES", "test_postgres",
             "the test kit (and this repository's tests): `debian` runs the test server from Debian's PostgreSQL "
             "package (the oldest major installed), `pgbouncer` the same behind a PgBouncer in transaction pooling "
             "mode; unset: the embedded wheel (docs/testkit.md)"),
    Variable("A44_TEST_POSTGRES_DIR", "test_postgres_dir",
             "the test kit (and this repository's tests): the directory under which the throwaway test server keeps "
             "its data; unset: /dev/shm when it is a writable tmpfs with 2 GiB free (a clone per test is ~10x "
             "faster in memory than on a disk mounted with `discard`), else the system's temp directory"),
    Variable("A44_DEBUG", "debug", "any value: an internal error prints its traceback", bool),
)
DEFAULT_PROJECT = "pj_default"   # the project when neither `--project` nor A44_PROJECT names one
SECRET_PREFIX = "A44_SECRET_"    # + the reference in upper case: a secret source of runtime/secrets/source.py


@dataclass(frozen=True)
class Settings:
    project: str | None = None
    database_url: str | None = None
    database_session_url: str | None = None
    app_database_url: str | None = None
    home: str | None = None
    api_url: str | None = None
    api_token: str | None = None
    worker_id: str | None = None
    concurrency: int | None = None
    lease_timeout: str | None = None
    synchronous_commit: str | None = None
    webhook_max_batch: int | None = None
    webhook_flushers: int | None = None
    webhook_cache_ttl: float | None = None
    alert_interval: str | None = None
    trace_url: str | None = None
    public_url: str | None = None
    secret_key: str | None = None
    networks_file: str | None = None
    pg_system_user: str | None = None
    notify_retry_base: str | None = None
    notify_retry_max: str | None = None
    notify_max_attempts: int | None = None
    notify_timeout: str | None = None
    log_hot_days: int | None = None
    log_archive_months: int | None = None
    log_archive_dir: str | None = None
    test_database_url: str | None = None
    test_postgres: str | None = None
    test_postgres_dir: str | None = None
    debug: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The variables of `environ` (default os.environ); an empty one counts as unset. ValueError naming the
        variable when a number is not one."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}  # each field its variable's kind: bool, int, float or str
        for var in VARIABLES:
            text = env.get(var.name) or None
            if text is None:
                continue
            if var.kind is bool:
                values[var.field] = True
            elif var.kind in (int, float):
                try:
                    values[var.field] = var.kind(text)
                except ValueError:
                    raise ValueError(f"{var.name}={text!r} is not a number") from None
            else:
                values[var.field] = text
        return cls(**values)


assert {v.field for v in VARIABLES} == {f.name for f in fields(Settings)}, "a variable without a field, or back"


def _markdown() -> str:
    """docs/settings.md, generated: `python -m anthares44.automation.settings > docs/settings.md`."""
    lines = ["# Environment variables", "",
             "Every `A44_*` variable a44 reads, declared once in `anthares44/automation/settings.py` and read once, "
             "when a",
             "command starts (a flag given on the command line wins). An empty variable counts as unset. "
             "Regenerate with",
             "`python -m anthares44.automation.settings > docs/settings.md`.", "",
             "| variable | meaning |", "|---|---|"]
    lines += [f"| `{v.name}` | {v.doc} |" for v in VARIABLES]
    lines += [f"| `{SECRET_PREFIX}<REF>` | the value of secret reference `<ref>` (upper case: `sec_erp_client` -> "
              f"`A44_SECRET_SEC_ERP_CLIENT`), the first secret source (docs/connectors.md); looked up by name when a "
              f"step needs it |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(_markdown(), end="")
