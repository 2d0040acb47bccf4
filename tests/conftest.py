"""Shared pytest setup. Only the PostgreSQL fixtures live here (tests/runtime/pg.py), so that any test
directory can ask for `pg_url` or `store`."""

import sys
from pathlib import Path

# `tests.runtime.pg` must import the same way whatever the entry point (pytest, python -m pytest) or cwd.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["tests.runtime.pg", "tests.rest_answers", "tests.sleep_census"]

# No timing in tests (README, "the bar"): hypothesis's default 200 ms deadline per example fails property tests on
# a loaded 2-core machine (seen: test_rule_language's round trip at load 7) without saying anything about the code.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("a44", deadline=None)
_hypothesis_settings.load_profile("a44")
