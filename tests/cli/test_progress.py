"""The progress bar of mass operations (replay, DLQ redrive): drawn on a terminal only, ended with a newline."""

import io
import sys

from anthares44.automation.cli.output import ProgressBar


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_draws_on_a_terminal_and_ends_the_line():
    out = _Tty()
    bar = ProgressBar("replaying", out)
    bar(1, 4)
    bar(4, 4)
    assert out.getvalue() == ("\rreplaying 1/4 [=======                       ]"
                              "\rreplaying 4/4 [==============================]\n")


def test_bar_is_silent_off_a_terminal_and_follows_the_current_stderr(monkeypatch):
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)   # replaced after import: the bar must use this one
    bar = ProgressBar("redriving")
    bar(3, None)
    bar.end()
    assert bar.stream is piped and piped.getvalue() == ""
