"""A trigger filter is evaluated off the event loop, bounded: the incident's catastrophic regex answers at once
(RE2), and the loop stays responsive while a filter evaluates."""

from __future__ import annotations

import asyncio
import time

from anthares44.automation.grammar import compile_expression
from anthares44.automation.runtime.ingestion.bus import filter_matches


def _trigger(cel: str) -> dict:
    res = compile_expression(cel, roots={"data", "type", "id", "idempotency_key", "partition_key", "occurred_at",
                                          "attempt"})
    assert res.program is not None, res.issues
    return {"filter": {"cel": cel, "program": res.program.to_ir()}}


def test_a_catastrophic_filter_answers_and_the_loop_keeps_running():
    trigger = _trigger(r"data.code.matches('^(\\d|\\d\\d)*-$') || data.l.map(a, data.l.map(b, a * b)).size() > 0")
    envelope = {"type": "t", "data": {"code": "1" * 40, "l": list(range(900))}}

    async def scenario():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        t = time.monotonic()
        matched = await filter_matches(trigger, envelope)
        elapsed = time.monotonic() - t
        tick.cancel()
        return matched, elapsed, ticks

    matched, elapsed, ticks = asyncio.run(scenario())
    assert matched is False                     # the 810,000-step map ends in E_EXPR_COST or the deadline: a miss
    assert elapsed < 3
    assert ticks >= elapsed / 0.01 / 4          # the loop was served meanwhile (not blocked by the evaluation)
