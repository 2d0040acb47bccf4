"""Schedules (§11): occurrence computation (pure) and the scheduler that turns occurrences into runs."""

from .occurrences import Firing, ScheduleError, classify, firings, firings_after, occurrence_iso, occurrence_key
from .scheduler import Decision, Scheduler, TickReport, decide, list_occurrences

__all__ = ["Decision", "Firing", "ScheduleError", "Scheduler", "TickReport", "classify", "decide", "firings",
           "firings_after", "list_occurrences", "occurrence_iso", "occurrence_key"]
