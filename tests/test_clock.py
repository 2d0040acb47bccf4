"""The clock's alarms (clock.py): what every daemon loop waits on, so that a VirtualClock moved by a test drives
the real engine. A virtual alarm rings only when the clock passes its instant, in instant order, from any thread;
the system clock's alarm is the loop's timer."""

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import pytest

from anthares44.automation.clock import SystemClock, VirtualClock, sleep_until, wait_event, wait_until

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_virtual_alarms_ring_when_the_clock_passes_them_in_instant_order():
    clock = VirtualClock(T0)
    rung: list[str] = []

    async def main():
        async def sleeper(name, after):
            await sleep_until(clock, T0 + after)
            rung.append(name)

        tasks = [asyncio.create_task(sleeper("3d", timedelta(days=3))),
                 asyncio.create_task(sleeper("1h", timedelta(hours=1))),
                 asyncio.create_task(sleeper("2d", timedelta(days=2)))]
        await asyncio.sleep(0)
        assert clock.next_alarm() == T0 + timedelta(hours=1)
        for _ in range(5):
            await asyncio.sleep(0)
        assert rung == []                                   # nothing rings while the clock stands still
        clock.advance(timedelta(days=2))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert rung == ["1h", "2d"]
        assert clock.next_alarm() == T0 + timedelta(days=3)
        clock.set(T0 + timedelta(days=30))
        await asyncio.gather(*tasks)
        assert rung == ["1h", "2d", "3d"]
        assert clock.next_alarm() is None

    asyncio.run(main())


def test_a_past_instant_rings_at_once_and_a_cancelled_alarm_is_forgotten():
    clock = VirtualClock(T0)

    async def main():
        assert clock.alarm(T0 - timedelta(seconds=1)).done()
        fut = clock.alarm(T0 + timedelta(minutes=5))
        assert clock.next_alarm() == T0 + timedelta(minutes=5)
        fut.cancel()
        assert clock.next_alarm() is None
        clock.advance(600)                                  # ringing a cancelled alarm is harmless

    asyncio.run(main())


def test_a_thread_moves_the_clock_while_a_loop_waits():
    clock = VirtualClock(T0)
    started = threading.Event()

    async def main():
        fut = clock.alarm(T0 + timedelta(days=30))
        started.set()
        await asyncio.wait_for(fut, timeout=10)             # a safety net; the other thread rings it at once
        return clock.now()

    mover = threading.Thread(target=lambda: (started.wait(10), clock.advance(timedelta(days=31))))
    mover.start()
    assert asyncio.run(main()) == T0 + timedelta(days=31)
    mover.join()


def test_wait_until_returns_what_completed_or_nothing_when_the_instant_came_first():
    clock = VirtualClock(T0)

    async def main():
        ev = asyncio.Event()
        waiter = asyncio.ensure_future(ev.wait())
        pending = asyncio.ensure_future(wait_until(clock, [waiter], T0 + timedelta(hours=1)))
        await asyncio.sleep(0)
        ev.set()
        assert await pending == {waiter}
        never = asyncio.get_running_loop().create_future()
        pending = asyncio.ensure_future(wait_until(clock, [never], T0 + timedelta(hours=1)))
        await asyncio.sleep(0)
        clock.advance(timedelta(hours=1))
        assert await pending == set()
        assert not never.done()                             # wait_until cancels nothing it was given
        assert await wait_event(clock, ev, None) is True
        other = asyncio.Event()
        pending = asyncio.ensure_future(wait_event(clock, other, T0 + timedelta(hours=2)))
        await asyncio.sleep(0)
        clock.advance(timedelta(hours=1))
        assert await pending is False
        never.cancel()

    asyncio.run(main())


def test_the_system_clocks_alarm_is_the_loops_timer():
    clock = SystemClock()

    async def main():
        assert clock.alarm(clock.now() - timedelta(seconds=1)).done()
        await asyncio.wait_for(sleep_until(clock, clock.now() + timedelta(milliseconds=20)), timeout=10)
        fut = clock.alarm(clock.now() + timedelta(hours=1))
        fut.cancel()                                        # releases the loop's timer
        await asyncio.sleep(0)

    asyncio.run(main())


def test_a_naive_instant_is_refused():
    with pytest.raises(ValueError):
        VirtualClock(datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        VirtualClock(T0).set(datetime(2026, 1, 1))
