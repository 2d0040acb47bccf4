"""Value types of the YAML surface: durations, cron expressions, IANA zones, identifiers.

Each is an `Annotated` pydantic type whose validator raises `PydanticCustomError` with an `a44_*` error type;
`compiler/mapping.py` turns those error types into stable diagnostic codes at the YAML position.
Durations are kept as integer milliseconds after validation; their JSON Schema stays the string form users write.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StrictBool, StrictInt, WithJsonSchema
from pydantic_core import PydanticCustomError

from ...calendar import SPAN_PATTERN
from ...durations import DURATION_PATTERN, duration_ms

MAX_DURATION_MS = 72 * 3600 * 1000  # a run may span up to 72 h of wall clock (§3.1), unless its maxDuration says more
MAX_RUN_SPAN_MS = 400 * 86_400_000  # ... at most 400 d (§19)


def validate_duration(value: Any) -> int:
    """The YAML `Duration`: the one grammar of durations.py, in milliseconds, with the rules of a step's span:
    no bare numbers, greater than zero, at most 72 h."""
    return _duration(value, MAX_DURATION_MS, "exceeds the 72h maximum a run may span")


def validate_run_span(value: Any) -> int:
    """The YAML `RunSpan`: a `Duration` that may reach the 400 d a run can last at most (§19); whether it fits the
    run's own `maxDuration` is rules/timers.py's question, which can name both."""
    return _duration(value, MAX_RUN_SPAN_MS, "exceeds the 400d a run may last at most")


def _duration(value: Any, limit_ms: int, too_long: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise PydanticCustomError("a44_duration", "expected a duration such as 250ms, 15s, 2m or 6h")
    if isinstance(value, (int, float)):
        raise PydanticCustomError("a44_duration", "duration {value} has no unit; write e.g. {value}s or {value}ms",
                                  {"value": value})
    try:
        total = duration_ms(value)
    except ValueError:
        raise PydanticCustomError("a44_duration",
                                  "'{value}' is not a duration; use a number with a unit: 250ms, 15s, 2m, 6h",
                                  {"value": value}) from None
    if total <= 0:
        raise PydanticCustomError("a44_duration", "duration must be greater than zero")
    if total > limit_ms:
        raise PydanticCustomError("a44_duration", "duration {value} " + too_long, {"value": value})
    return total


def check_span(value: Any) -> str:
    """A sleep's `for:` (§19): calendar units (`1y`, `1mo`, `2w`, `3d`, in local wall time) then fixed ones."""
    from ...calendar import CalendarError, parse_span

    if not isinstance(value, str):
        raise PydanticCustomError("a44_duration", "expected a span such as 1mo, 2w, 30d or 12h, got {value!r}",
                                  {"value": value})
    try:
        parse_span(value)
    except CalendarError as exc:
        raise PydanticCustomError("a44_duration", str(exc)) from None
    return value.strip()


def format_duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


Duration = Annotated[
    int, BeforeValidator(validate_duration),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN,
                    "description": "A duration: numbers with units (d, h, m, s, ms, largest first), e.g. `250ms`, "
                                   "`15s`, `6h`; at most 72h.",
                    "examples": ["250ms", "15s", "2m", "6h"]}),
]
RunSpan = Annotated[
    int, BeforeValidator(validate_run_span),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN,
                    "description": "A duration: numbers with units (d, h, m, s, ms, largest first), e.g. `15s`, "
                                   "`6h`, `30d`; at most the workflow's `maxDuration` (default 72h, at most 400d).",
                    "examples": ["250ms", "15s", "2m", "6h", "30d"]}),
]
CalendarSpan = Annotated[
    str, BeforeValidator(check_span),
    WithJsonSchema({"type": "string", "pattern": SPAN_PATTERN,
                    "description": "A span: calendar units `y`, `mo`, `w`, `d` (in local wall time of `tz`; month "
                                   "ends clamped), then fixed `h`, `m`, `s`, `ms`, largest first, e.g. `1mo`, `2w`, "
                                   "`1d12h`.",
                    "examples": ["1mo", "2w", "30d", "1y"]}),
]


def check_cron(value: Any) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError("a44_cron", "cron must be a string of five fields, e.g. \"15 3 * * *\"")
    fields = value.split()
    if len(fields) != 5:
        raise PydanticCustomError(
            "a44_cron", "cron '{value}' has {n} fields; five are required: minute hour day-of-month month "
                        "day-of-week", {"value": value, "n": len(fields)})
    from croniter import croniter  # lazy: only files with schedules pay for it

    try:
        ok = croniter.is_valid(value)
    except Exception:  # croniter raises assorted types on odd input  # noqa: BLE001
        ok = False
    if not ok:
        raise PydanticCustomError("a44_cron", "cron '{value}' is not a valid five-field expression",
                                  {"value": value})
    return " ".join(fields)


Cron = Annotated[str, BeforeValidator(check_cron),
                 WithJsonSchema({"type": "string", "pattern": r"^\s*(\S+\s+){4}\S+\s*$",
                                 "description": "Five-field cron: minute hour day-of-month month day-of-week, "
                                                "e.g. `15 3 * * *`."})]


def check_tz(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise PydanticCustomError("a44_tz", "tz must be an IANA time zone name such as America/Sao_Paulo")
    import zoneinfo

    try:
        if value != value.strip() or value.startswith("/") or ".." in value:
            raise ValueError
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise PydanticCustomError("a44_tz", "'{value}' is not a known IANA time zone (e.g. America/Sao_Paulo, "
                                            "Europe/Lisbon, UTC)", {"value": value}) from None
    return value


TimeZone = Annotated[str, BeforeValidator(check_tz),
                     WithJsonSchema({"type": "string", "description": "IANA time zone, e.g. `America/Sao_Paulo`.",
                                     "examples": ["America/Sao_Paulo", "Europe/Lisbon", "UTC"]})]


def check_version(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PydanticCustomError("a44_version", "version must be a positive integer (1, 2, 3...), got '{value}'",
                                  {"value": value})
    return value


Version = Annotated[int, BeforeValidator(check_version),
                    WithJsonSchema({"type": "integer", "minimum": 1,
                                    "description": "Positive integer; increment it whenever the steps change."})]

# the formats of a workflow's `name` and a step's `id`, for YAML (these models) and Python code (sdk/lint.py) alike
WORKFLOW_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
STEP_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
StepId = Annotated[str, Field(pattern=STEP_ID_PATTERN)]
ObjectId = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")]
PositiveInt = Annotated[StrictInt, Field(ge=1)]
Bool = StrictBool
