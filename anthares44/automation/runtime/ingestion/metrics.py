"""In-process counters of the ingestion plane, exposed as Prometheus text at `GET /metrics`.

They live in memory on purpose: a rejected webhook must not write anything (§9), and a filter miss must cost a
counter increment, not a row (§8.4)."""

from __future__ import annotations

import threading
from collections import defaultdict

HELP = {
    "webhook_rejected_total": "webhook requests refused, by reason",
    "webhook_accepted_total": "webhook requests accepted (created or deduplicated)",
    "events_published_total": "bus events accepted (created or deduplicated)",
    "event_filter_miss_total": "event deliveries dropped by a trigger filter, by trigger",
    "event_too_old_total": "event deliveries sent to the DLQ with E_EVENT_TOO_OLD, by trigger",
    "api_rejected_total": "REST API requests refused by authentication, by reason",
}


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], int] = defaultdict(int)

    def inc(self, name: str, n: int = 1, **labels: str) -> None:
        key = (name, tuple(sorted((k, str(v)) for k, v in labels.items())))
        with self._lock:
            self._values[key] += n

    def get(self, name: str, **labels: str) -> int:
        """The counter's value; without labels, the sum over every label set."""
        want = tuple(sorted((k, str(v)) for k, v in labels.items()))
        with self._lock:
            if labels:
                return self._values.get((name, want), 0)
            return sum(v for (n, _), v in self._values.items() if n == name)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {_series(n, lb): v for (n, lb), v in sorted(self._values.items())}

    def render(self) -> str:
        """Prometheus text exposition format."""
        out, seen = [], set()
        with self._lock:
            items = sorted(self._values.items())
        for (name, labels), value in items:
            if name not in seen:
                seen.add(name)
                out.append(f"# HELP {name} {HELP.get(name, name)}")
                out.append(f"# TYPE {name} counter")
            out.append(f"{_series(name, labels)} {value}")
        return "\n".join(out) + "\n"

    def reset(self) -> None:
        with self._lock:
            self._values.clear()


def _series(name: str, labels) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return f"{name}{{{inner}}}"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


COUNTERS = Counters()
