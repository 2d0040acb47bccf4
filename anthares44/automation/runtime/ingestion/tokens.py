"""API tokens (§17): `a44_pat_` + 43 url-safe characters (32 random bytes), stored as sha256 only, bound to one
project, scoped (`automation:read`, `automation:write`, `automation:admin`: tokens and webhook secrets over the API;
admin implies write, write implies read; `automation:approve`: decide approvals, implies read), expiring, optionally limited to
CIDRs. `check_token` decides 401 (missing, unknown, expired, revoked) versus 403 (scope, address)."""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from ...errors import E_FORBIDDEN, E_INVALID_ARGUMENT, E_TOKEN_INVALID, E_TOKEN_NOT_FOUND, A44Error, http_status
from .ids import new_id

SCOPES = ("automation:read", "automation:write", "automation:admin", "automation:approve")
# approve (§20: approvers need no write rights) lets a token decide approvals and read what it decides on
_IMPLIED = {"automation:admin": {"automation:write", "automation:read", "automation:approve"},
            "automation:write": {"automation:read"}, "automation:approve": {"automation:read"}}
TOKEN_PREFIX = "a44_pat_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class NewToken:
    token_id: str
    token: str                    # shown once
    project_id: str
    name: str
    scopes: list[str]
    allow_cidrs: list[str]
    expires_at: datetime | None

    def to_dict(self) -> dict:
        return {"token_id": self.token_id, "token": self.token, "project_id": self.project_id, "name": self.name,
                "scopes": self.scopes, "allow_cidrs": self.allow_cidrs, "expires_at": self.expires_at}


@dataclass(frozen=True)
class Principal:
    token_id: str
    project_id: str
    name: str
    scopes: frozenset[str]
    expires_at: datetime | None = None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes or any(scope in _IMPLIED.get(s, ()) for s in self.scopes)


class AuthError(Exception):
    """A refused token: its code (HTTP status from errors.py), message, and the reason label of
    api_rejected_total."""

    def __init__(self, code: str, message: str, reason: str):
        super().__init__(message)
        self.status, self.code, self.message, self.reason = http_status(code), code, message, reason


async def create_token(store, project: str, name: str, scopes: list[str], expires: timedelta | None,
                       allow_cidrs: list[str] | None = None) -> NewToken:
    if not name or not name.strip():
        raise A44Error(E_INVALID_ARGUMENT, "a token needs a --name")
    if name.startswith("local:"):   # that is how a local CLI call is named (approvals): a token may not pose as one
        raise A44Error(E_INVALID_ARGUMENT, f"a token's name may not start with 'local:' ({name!r})",
                       hint="local:<os user> names a local CLI call (docs/approvals.md); pick another name")
    for s in scopes:
        if s not in SCOPES:
            raise A44Error(E_INVALID_ARGUMENT, f"unknown scope {s!r}", hint=f"one of: {', '.join(SCOPES)}")
    if not scopes:
        raise A44Error(E_INVALID_ARGUMENT, "a token needs a --scope", hint=f"one of: {', '.join(SCOPES)}")
    cidrs = []
    for c in allow_cidrs or []:
        try:
            cidrs.append(str(ipaddress.ip_network(c, strict=False)))
        except ValueError:
            raise A44Error(E_INVALID_ARGUMENT, f"{c!r} is not a CIDR", hint="e.g. 203.0.113.0/24") from None
    now = store.clock.now()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = new_id("tok", now)
    expires_at = now + expires if expires is not None else None
    await store.execute("token_insert", token_id=token_id, project=project, name=name, sha256=token_hash(token),
                        scopes=list(scopes), cidrs=cidrs, now=now, expires_at=expires_at)
    return NewToken(token_id, token, project, name, list(scopes), cidrs, expires_at)


async def check_token(store, authorization: str | None, remote: str | None, scope: str) -> Principal:
    if not authorization:
        raise AuthError(E_TOKEN_INVALID, "an API token is required (Authorization: Bearer a44_pat_...)",
                        "missing")
    kind, _, token = authorization.partition(" ")
    token = token.strip()
    if kind.lower() != "bearer" or not token:
        raise AuthError(E_TOKEN_INVALID, "use Authorization: Bearer <token>", "malformed")
    try:
        address = str(ipaddress.ip_address((remote or "").split("%")[0]))
    except ValueError:
        address = "0.0.0.0"
    row = await store.fetchrow("token_by_hash", sha256=token_hash(token), address=address)
    now = store.clock.now()
    if row is None:
        raise AuthError(E_TOKEN_INVALID, "unknown API token", "unknown")
    if row["revoked_at"] is not None:
        raise AuthError(E_TOKEN_INVALID, "this API token was revoked", "revoked")
    if row["expires_at"] is not None and row["expires_at"] <= now:
        raise AuthError(E_TOKEN_INVALID, "this API token has expired", "expired")
    if not row["address_allowed"]:
        raise AuthError(E_FORBIDDEN, f"this API token is not allowed from {address}", "cidr")
    principal = Principal(row["token_id"], row["project_id"], row["name"], frozenset(row["scopes"]),
                          row["expires_at"])
    if not principal.allows(scope):
        raise AuthError(E_FORBIDDEN, f"this API token lacks the {scope} scope", "scope")
    return principal


async def list_tokens(store, project: str) -> list[dict]:
    return [dict(r) for r in await store.fetch("tokens_list", project=project)]


async def revoke_token(store, project: str, token_id: str) -> None:
    if await store.fetchval("token_revoke", token_id=token_id, project=project, now=store.clock.now()) is None:
        raise A44Error(E_TOKEN_NOT_FOUND, f"no active token {token_id} in {project}")
