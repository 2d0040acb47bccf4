"""Notification channels: the declared objects a rule's `--notify NAME` names. Their kinds and the exact shape of
each kind's config (checked before anything is written), and their rows (queries/notifications.sql).

    webhook  {"url": "https://...", "secretRef": "sec_..."}     signed JSON (docs/webhooks.md's scheme)
    slack    {"url": "https://hooks.slack.com/..."}             Slack-compatible incoming webhook
    email    {"from": "a44@x", "to": ["oncall@x"], "smtp": {"host", "port", "starttls", "usernameSecretRef"?,
              "passwordSecretRef"?}}

Secrets only by reference: a value is resolved when a message is sent, never stored in the channel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ...errors import E_CHANNEL_EXISTS, E_CHANNEL_INVALID, E_CHANNEL_NOT_FOUND, A44Error
from ...suggestions import closest
from ..secrets.file import SECRET_REF

KINDS = ("webhook", "slack", "email")
CHANNEL_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
ADDRESS = re.compile(r"^[^@\s<>,;\"]+@[^@\s<>,;\"]+$")
MAX_RECIPIENTS = 50


def _invalid(message: str, hint: str | None = None) -> A44Error:
    return A44Error(E_CHANNEL_INVALID, message, hint=hint)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not CHANNEL_NAME.match(name):
        raise _invalid(f"channel name {str(name)[:80]!r} is not valid",
                       hint="lower-case letters, digits, '-', '_' or '.', starting with a letter or digit, "
                            "63 characters at most (squad-billing)")
    return name


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        near = closest(str(kind), KINDS, 0.5)
        raise _invalid(f"unknown channel type {str(kind)[:40]!r}",
                       hint=(f"did you mean {near}? " if near else "") + "types: " + ", ".join(KINDS))
    return kind


def check_url(url: Any, field: str = "url") -> str:
    """An absolute http(s) URL with a host and no user:password part (a secret goes by reference)."""
    if not isinstance(url, str) or not url:
        raise _invalid(f"{field} is missing", hint="an absolute URL: https://hooks.example.com/a44")
    try:
        parts = urlsplit(url)
        parts.port      # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise _invalid(f"{field} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        near = closest(parts.scheme, ("http", "https"), 0.6) if parts.scheme else None
        raise _invalid(f"{field} must be an http:// or https:// URL (got scheme {parts.scheme or 'none'!r})",
                       hint=f"did you mean {near}://{parts.netloc}{parts.path}?" if near else
                       "an absolute URL: https://hooks.example.com/a44")
    if not parts.hostname:
        raise _invalid(f"{field} has no host", hint="an absolute URL: https://hooks.example.com/a44")
    if parts.username is not None or parts.password is not None:
        raise _invalid(f"{field} may not carry a user or password",
                       hint="webhook channels sign with --secret-ref; put no credentials in the URL")
    return url


def check_secret_ref(ref: Any, field: str) -> str:
    if not isinstance(ref, str) or not SECRET_REF.match(ref):
        raise _invalid(f"{field} {str(ref)[:80]!r} is not a secret reference",
                       hint="sec_ followed by letters, digits or _ (a44 automation secrets set sec_hook)")
    return ref


def _check_keys(config: dict, allowed: set[str], where: str) -> None:
    for key in config:
        if key not in allowed:
            near = closest(str(key), allowed, 0.6)
            raise _invalid(f"unknown field {str(key)[:40]!r} in {where}",
                           hint=(f"did you mean {near}? " if near else "") + "fields: " + ", ".join(sorted(allowed)))


def _check_webhook(config: dict) -> dict:
    _check_keys(config, {"url", "secretRef"}, "a webhook channel")
    if "secretRef" not in config:
        raise _invalid("a webhook channel needs secretRef (its messages are signed)",
                       hint="--secret-ref sec_hook (a44 automation secrets set sec_hook)")
    return {"url": check_url(config.get("url")), "secretRef": check_secret_ref(config["secretRef"], "secretRef")}


def _check_slack(config: dict) -> dict:
    _check_keys(config, {"url"}, "a slack channel")
    return {"url": check_url(config.get("url"))}


def _check_address(value: Any, field: str) -> str:
    if not isinstance(value, str) or not ADDRESS.match(value) or len(value) > 254:
        raise _invalid(f"{field} {str(value)[:80]!r} is not an email address", hint="name@example.com")
    return value


def _check_email(config: dict) -> dict:
    _check_keys(config, {"from", "to", "smtp"}, "an email channel")
    to = config.get("to")
    if isinstance(to, str):
        to = [to]
    if not isinstance(to, list) or not to or len(to) > MAX_RECIPIENTS:
        raise _invalid(f"an email channel needs 1..{MAX_RECIPIENTS} recipients in `to`", hint="--to oncall@example.com")
    smtp = config.get("smtp")
    if not isinstance(smtp, dict):
        raise _invalid("an email channel needs `smtp` {host, port, starttls}", hint="--smtp-host mail.example.com")
    _check_keys(smtp, {"host", "port", "starttls", "usernameSecretRef", "passwordSecretRef"}, "smtp")
    host, port, starttls = smtp.get("host"), smtp.get("port", 587), smtp.get("starttls", True)
    if not isinstance(host, str) or not host or any(c in host for c in "/@: \t"):
        raise _invalid(f"smtp host {str(host)[:80]!r} is not a host name", hint="--smtp-host mail.example.com")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise _invalid(f"smtp port {port!r} is not a port (1..65535)", hint="--smtp-port 587")
    if not isinstance(starttls, bool):
        raise _invalid("smtp starttls must be true or false")
    out_smtp: dict[str, Any] = {"host": host, "port": port, "starttls": starttls}
    for field in ("usernameSecretRef", "passwordSecretRef"):
        if smtp.get(field) is not None:
            out_smtp[field] = check_secret_ref(smtp[field], field)
    if ("usernameSecretRef" in out_smtp) != ("passwordSecretRef" in out_smtp):
        raise _invalid("smtp login needs both usernameSecretRef and passwordSecretRef, or neither")
    return {"from": _check_address(config.get("from"), "from"),
            "to": [_check_address(a, "to") for a in to], "smtp": out_smtp}


CHECKS: dict[str, Callable[[dict], dict]] = {"webhook": _check_webhook, "slack": _check_slack, "email": _check_email}


def check_config(kind: str, config: Any) -> dict:
    """The config of a channel of `kind` in its one shape (E_CHANNEL_INVALID naming the field otherwise)."""
    check_kind(kind)
    if not isinstance(config, dict):
        raise _invalid(f"a {kind} channel's config must be an object")
    return CHECKS[kind](config)


def secret_refs(kind: str, config: dict) -> list[str]:
    """The secret references a channel's messages need."""
    if kind == "webhook":
        return [config["secretRef"]]
    if kind == "email":
        return [config["smtp"][f] for f in ("usernameSecretRef", "passwordSecretRef") if f in config["smtp"]]
    return []


def public_config(kind: str, config: dict) -> dict:
    """The config as shown: a Slack incoming-webhook URL is itself the credential, so only its host is shown."""
    if kind == "slack":
        parts = urlsplit(config["url"])
        return {"url": f"{parts.scheme}://{parts.netloc}/…"}
    return config


async def create(store, project: str, name: str, kind: str, config: dict) -> dict:
    config = check_config(kind, config)
    check_name(name)
    made = await store.fetchval("notify_channel_insert", project=project, name=name, kind=kind,
                                config=json.dumps(config), now=store.clock.now())
    if made is None:
        raise A44Error(E_CHANNEL_EXISTS, f"channel {name} exists already",
                       hint=f"a44 monitor channel rm {name} first, or choose another name")
    return {"name": name, "kind": kind, "config": public_config(kind, config)}


async def names(store, project: str) -> list[str]:
    return [r["name"] for r in await store.fetch("notify_channel_list", project=project)]


async def not_found(store, project: str, name: str) -> A44Error:
    near = closest(name, await names(store, project), 0.6)
    return A44Error(E_CHANNEL_NOT_FOUND, f"no channel {name} in {project}",
                    hint=f"did you mean {near}?" if near else "a44 monitor channel list")


async def get(store, project: str, name: str) -> dict:
    row = await store.fetchrow("notify_channel_get", project=project, name=name)
    if row is None:
        raise await not_found(store, project, name)
    return dict(row)


async def listing(store, project: str) -> list[dict]:
    return [{**dict(r), "config": public_config(r["kind"], r["config"])}
            for r in await store.fetch("notify_channel_list", project=project)]


async def remove(store, project: str, name: str) -> None:
    if await store.fetchval("notify_channel_delete", project=project, name=name) is None:
        raise await not_found(store, project, name)
