"""In-process counters of the ingestion plane, exposed at `GET /metrics` labelled `worker` (app/metrics.py).

They live in memory on purpose: a rejected webhook must not write a row (§9), and a filter miss must cost a
counter increment, not a row (§8.4). What they counted is added to the store's persisted totals once a second
(`take` / `give_back`, flushed by runtime/system_metrics.py), so a flood costs one statement a second."""

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
    "wait_correlation_errors_total": "events whose correlation program (an event wait's correlate.event) failed, "
                                     "by event type: not indexed for that program, never a crash",
    "wait_event_before_since_total": "correlated events an event wait skipped as older than its `since`, by type",
    "wait_event_if_errors_total": "correlated events an event wait's `if` failed on (a non-match), by type",
}


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], int] = defaultdict(int)
        self._flushed: dict[tuple[str, tuple[tuple[str, str], ...]], int] = defaultdict(int)

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

    def take(self) -> list[tuple[str, dict[str, str], int]]:
        """What was counted since the last take, as (name, labels, increment); marked as flushed. A flush that
        fails hands it back with `give_back`, so nothing is counted twice or lost while the process lives."""
        with self._lock:
            out = [(name, dict(labels), v - self._flushed[(name, labels)])
                   for (name, labels), v in self._values.items() if v != self._flushed[(name, labels)]]
            for (name, labels), v in self._values.items():
                self._flushed[(name, labels)] = v
        return out

    def give_back(self, taken: list[tuple[str, dict[str, str], int]]) -> None:
        with self._lock:
            for name, labels, n in taken:
                self._flushed[(name, tuple(sorted(labels.items())))] -= n

    def items(self) -> list[tuple[str, dict[str, str], int]]:
        with self._lock:
            return [(name, dict(labels), v) for (name, labels), v in sorted(self._values.items())]

    def reset(self) -> None:
        with self._lock:
            self._values.clear()
            self._flushed.clear()


COUNTERS = Counters()
