"""Run identifiers: `run_<ULID>` (48-bit millisecond time + 80 random bits, Crockford base32).

Written here rather than taken from a library: it is 40 lines. Ids generated within the same millisecond by
one process are monotonic (the random part is incremented), so ids sort by creation order, which keeps the
`runs` primary-key index append-mostly.
"""

from __future__ import annotations

import secrets
import threading
from datetime import datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford: no I, L, O, U
_RANDOM_BITS = 80
_RANDOM_MAX = (1 << _RANDOM_BITS) - 1


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def decode_time_ms(ulid: str) -> int:
    """The millisecond timestamp carried by a ULID (with or without a `run_` style prefix)."""
    body = ulid.rsplit("_", 1)[-1][:10]
    value = 0
    for ch in body.upper():
        value = value * 32 + _ALPHABET.index(ch)
    return value


class UlidGenerator:
    """Monotonic ULIDs; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def new(self, at: datetime) -> str:
        ms = int(at.timestamp() * 1000)
        with self._lock:
            if ms <= self._last_ms:
                # same (or earlier: clock moved back) millisecond: keep order by incrementing
                ms = self._last_ms
                rand = self._last_rand + 1
                if rand > _RANDOM_MAX:  # 2^80 ids in one ms: move to the next ms instead of wrapping
                    ms, rand = ms + 1, secrets.randbits(_RANDOM_BITS) >> 1
            else:
                # top bit cleared leaves room to increment within the millisecond
                rand = secrets.randbits(_RANDOM_BITS) >> 1
            self._last_ms, self._last_rand = ms, rand
        return _encode(ms, 10) + _encode(rand, 16)


_default = UlidGenerator()


def new_run_id(at: datetime) -> str:
    return "run_" + _default.new(at)
