"""The outage tracker (runtime/outage.py): one line when the control store is lost and one when it is back, and a
round that began before the loss was noticed does not count as "back" (while a server shuts down, a statement sent
just before can still succeed after another loop failed: that used to log the outage twice)."""

import logging
import time

from anthares44.automation.runtime.outage import Outage

URL = "postgresql://a44@127.0.0.1:1/a44"


def test_a_round_begun_before_the_loss_does_not_end_the_outage(caplog):
    outage = Outage()
    caplog.set_level(logging.INFO, logger="a44.lifecycle")
    began_early = time.monotonic()
    assert outage.failed(URL, "claim", RuntimeError("terminating connection"))
    assert not outage.ok(URL, began_early)           # in flight before the loss: proves nothing
    assert outage.is_lost(URL)
    assert not outage.failed(URL, "scheduler", RuntimeError("connection refused"))   # same outage: no new line
    assert outage.ok(URL, time.monotonic())           # a round begun after the loss: the database is back
    assert not outage.is_lost(URL)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("database unreachable" in m for m in lines) == 1
    assert sum("database reachable again" in m for m in lines) == 1
