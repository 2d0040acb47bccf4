import re
from datetime import UTC, datetime, timedelta

from anthares44.automation.runtime.ulid import UlidGenerator, decode_time_ms, new_run_id


def test_run_id_shape_and_time():
    at = datetime(2026, 7, 19, 14, 2, 11, 884000, tzinfo=UTC)
    assert re.fullmatch(r"run_[0-9A-HJKMNP-TV-Z]{26}", new_run_id(at))
    ulid = UlidGenerator().new(at)  # a fresh generator: the shared one stays monotonic after later clocks
    assert decode_time_ms(ulid) == int(at.timestamp() * 1000)


def test_monotonic_within_a_millisecond_and_across_time():
    gen = UlidGenerator()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    same_ms = [gen.new(at) for _ in range(1000)]
    assert same_ms == sorted(same_ms) and len(set(same_ms)) == 1000
    later = gen.new(at + timedelta(milliseconds=1))
    assert later > same_ms[-1]
    # a clock that steps back does not break ordering
    assert gen.new(at - timedelta(seconds=5)) > later
