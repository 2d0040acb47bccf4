"""A poison run cannot freeze the daemons: two real `serve` daemons (lease 3 s) drive N healthy runs alone, then N
healthy runs next to the incident's poisons (a nested Jinja `range` over input.n = 20,000, and the `if:`
`input.code.matches('^(\\d|\\d\\d)*-$')` on 40 digits). The template poison fails at once with E_TEMPLATE_LIMIT,
the regex one answers in linear time, every healthy run succeeds, no lease is re-granted and no attempt is
interrupted, and the healthy median latency stays within a generous bound of the baseline measured here.

Before the bounds, the nested loop ran 4e8 iterations on the event loop (minutes) and the regex backtracked
exponentially: leases expired and healthy latency went from sub-second to tens of seconds.
N = 40 keeps the test near 20 s on a shared 2-core machine (the bounded version CI runs); `A44_SLOW=1` runs the
issue's full N = 100, as bench/bench_poison.py does.
"""

from __future__ import annotations

import os
import statistics

import pytest

from tests.runtime.poison_support import run_scenario

N = 100 if os.environ.get("A44_SLOW") == "1" else 40


@pytest.mark.slow
def test_poison_runs_next_to_healthy_runs_on_two_daemons(pg_url, tmp_path):
    f = run_scenario(pg_url, tmp_path, n=N, poisons=2)
    outcomes = sorted((wf, state, code) for wf, state, code in f.poison.values())
    assert outcomes == [("wf_poison-regex", "succeeded", None)] * 2 + \
        [("wf_poison-template", "failed", "E_TEMPLATE_LIMIT")] * 2
    assert f.healthy_states == {"succeeded": N}
    assert f.lease_reclaims == 0 and f.lease_expired_attempts == 0
    base, hot = statistics.median(f.baseline_s), statistics.median(f.poisoned_s)
    assert hot <= 3 * base + 1.0, (base, hot)
