"""Fixtures of the partition tests: the loopback server fixture, and a run that ended `partial`."""

import pytest

from tests.connectors.conftest import serve  # noqa: F401  (the loopback aiohttp server fixture)
from tests.partitions.support import DailyApi, compile_yaml, daily_yaml, start

BAD, SLOW = "2026-07-04", "2026-07-09"


@pytest.fixture
def partial_run(store, clock, aio, serve, tmp_path):
    """A 10-day run that ended `partial`: BAD answered 422, SLOW timed out (twice)."""
    api = DailyApi()
    api.reject, api.hang = {BAD}, {SLOW}
    ir = compile_yaml(tmp_path, daily_yaml(serve(api.app())))
    eng, run_id, run = aio(start(store, clock, ir, "2026-07-01", "2026-07-10"))
    assert run["state"] == "partial"
    yield api, eng, run_id
    aio(eng.registry.aclose())
