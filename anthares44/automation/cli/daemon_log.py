"""The log of a long-running process (`serve`, `ingest`) on stderr: its lifecycle at INFO (started, migrated,
listening, stopped; the database lost and back) shown by default, warnings always, run state changes with -v and
step attempts with -vv; `--log-format text` (default) or `json`, one object per line:

    {"ts": "2026-07-19T14:02:11.884Z", "level": "INFO", "logger": "a44.lifecycle", "message": "serving worker=...",
     "run_id": "run_01K...", "step_id": "reserve-funds", "attempt": 2, "trace_id": "4bf92f35..."}

The correlation fields appear when the line is about a run (a logging call's `extra=`). An expected condition
(the database away, a refused request) is one line without a traceback; a traceback means a bug of ours.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime

CORRELATION = ("run_id", "step_id", "attempt", "trace_id")
LOG_FORMATS = ("text", "json")
LIFECYCLE = "a44.lifecycle"


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                   help="stderr log lines: text (default) or json (one object per line: ts, level, logger, message, "
                        "run_id, step_id, attempt, trace_id)")


def _ts(record: logging.LogRecord) -> str:
    at = datetime.fromtimestamp(record.created, tz=UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": _ts(record), "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for name in CORRELATION:
            value = getattr(record, name, None)
            if value is not None:
                doc[name] = value
        if record.exc_info:
            doc["traceback"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = "".join(f" {n}={getattr(record, n)}" for n in CORRELATION if getattr(record, n, None) is not None)
        line = f"{_ts(record)} {record.levelname} {record.name} {record.getMessage()}{fields}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


_CONNECTION_ERRORS = {"PostgresConnectionError", "CannotConnectNowError", "ConnectionDoesNotExistError",
                      "InterfaceError", "ConnectionRejectionError"}


def _connection_error(exc: BaseException | None) -> bool:
    """The driver failing to reach the database: an expected condition the outage line already reports."""
    if exc is None:
        return False
    if isinstance(exc, (OSError, ConnectionError, TimeoutError)):
        return True
    return any(c.__name__ in _CONNECTION_ERRORS for c in type(exc).__mro__)


class Verbosity(logging.Filter):
    """a44's lines: the lifecycle at INFO and up always, others from `threshold` up (WARNING by default, INFO with
    -v, DEBUG with -vv). Libraries' lines: WARNING and up, except a driver's retry of a lost connection (asyncpg
    logs one with a traceback per reconnect attempt; runtime/outage.py says it once)."""

    def __init__(self, threshold: int):
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "a44" or record.name.startswith("a44."):
            return record.levelno >= self.threshold or (record.name == LIFECYCLE and record.levelno >= logging.INFO)
        if record.levelno < logging.WARNING:
            return False
        return not (record.exc_info and _connection_error(record.exc_info[1]))


def configure(log_format: str = "text", verbose: int = 0, stream=None) -> logging.Handler:
    """One handler for this process's log (a44's and its libraries'), on the root logger; returns it."""
    threshold = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(Verbosity(threshold))
    logging.getLogger("a44").setLevel(min(threshold, logging.INFO))
    root = logging.getLogger()
    root.setLevel(min(threshold, logging.WARNING))
    root.addHandler(handler)
    logging.captureWarnings(True)    # a library's warnings.warn is a line of this log too, in its format
    return handler
