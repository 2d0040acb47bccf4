"""Path, query and header parameters of the HTTP plane, checked in one place before anything reaches SQL.

Every value a route reads from the URL or a header is declared in PATH, QUERY or HEADERS with its parser: ids
(a short charset, a length cap), printable text, integers within PostgreSQL's bigint, durations (the project's
parser, capped). A value that does not parse is a 400 `E_BAD_REQUEST` naming the parameter; handlers read the
parsed values from `params(request)` and never the raw strings. Query parameters nobody declared are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from ..app.contract.models.common import ID_PATTERN, MAX_ID_LEN
from ..durations import parse_duration
from ..errors import E_BAD_REQUEST, A44Error

PARAMS_KEY = web.RequestKey("params", dict) if hasattr(web, "RequestKey") else "params"
MAX_TEXT_LEN = 200
BIGINT_MAX = 2 ** 63 - 1


def bad(name: str, message: str) -> A44Error:
    return A44Error(E_BAD_REQUEST, f"{name}: {message}")


def ident(name: str, raw: str) -> str:
    """Project, trigger, run, event, workflow, step ids and run states: what the compiler and the ULIDs produce."""
    if not 0 < len(raw) <= MAX_ID_LEN or not ID_PATTERN.fullmatch(raw):
        raise bad(name, f"an id is 1..{MAX_ID_LEN} characters of A-Z a-z 0-9 _ . : - (starting with a letter "
                        "or digit)")
    return raw


def text(name: str, raw: str) -> str:
    if not 0 < len(raw) <= MAX_TEXT_LEN or not raw.isprintable():
        raise bad(name, f"expected 1..{MAX_TEXT_LEN} printable characters")
    return raw


def count(name: str, raw: str) -> int:
    """A non-negative integer that fits a bigint (limits, offsets, event ids)."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > BIGINT_MAX:
        raise bad(name, f"expected an integer from 0 to {BIGINT_MAX}")
    return int(raw)


def age(name: str, raw: str):
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise bad(name, str(exc)) from None


def cursor(name: str, raw: str) -> str:
    """A log query's keyset cursor as `logs query` printed it (base64url); its content is checked where it is read."""
    if not 0 < len(raw) <= 4 * MAX_ID_LEN or not re.fullmatch(r"[A-Za-z0-9_-]+", raw):
        raise bad(name, "expected the `next` value of a previous answer")
    return raw


def flag(name: str, raw: str) -> bool:
    value = raw.lower()
    if value not in ("", "1", "0", "true", "false", "yes", "no"):
        raise bad(name, "expected true or false")
    return value in ("1", "true", "yes")


Parser = Callable[[str, str], Any]
PATH: dict[str, Parser] = {"project": ident, "trigger": ident, "run_id": ident, "event_id": ident, "target": ident,
                           "queue": ident, "dead_letter_id": ident, "token_id": ident, "name": ident, "step": ident,
                           "notification_id": count, "workflow": ident, "version": count}
QUERY: dict[str, Parser] = {"state": ident, "workflow": ident, "step": ident, "since": age, "type": text,
                            "limit": count, "offset": count, "after": count, "follow": flag,
                            "partition": text, "error_code": ident, "partition_key": text, "until": age,
                            "cursor": cursor, "archive": flag, "queue": ident, "with_attempts": flag,
                            "name": text, "timeout": age, "mine": flag, "overdue": flag, "sample": count}
HEADERS: dict[str, Parser] = {"Last-Event-ID": count}


def check(request: web.Request) -> dict:
    """The parsed parameters of `request` (path always; query and headers on the REST API), or E_BAD_REQUEST."""
    parsed = {name: PATH[name](f"path segment {{{name}}}", raw) for name, raw in request.match_info.items()
              if name in PATH}
    if request.path.startswith("/v1/automation/"):
        for name, raw in request.query.items():
            if name in QUERY:
                if name in parsed:
                    raise bad(f"query parameter {name}", "given more than once")
                parsed[name] = QUERY[name](f"query parameter {name}", raw)
        for name, parse in HEADERS.items():
            values = request.headers.getall(name, [])
            if len(values) > 1:
                raise bad(f"header {name}", "given more than once")
            if values:
                parsed[name] = parse(f"header {name}", values[0])
    return parsed


def params(request: web.Request) -> dict:
    return request[PARAMS_KEY]
