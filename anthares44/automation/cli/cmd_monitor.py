"""`a44 monitor ...`: the group beside `automation` and `auth` for what tells people about the system:
notification channels and notifications (cmd_channels.py)."""

from __future__ import annotations

import argparse

from .output import ArgParser


def add_group(top) -> None:
    monitor = top.add_parser("monitor", help="notification channels and notifications", description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = monitor.add_subparsers(dest="monitor_verb", metavar="VERB", parser_class=ArgParser)
    verbs.required = True
    from . import cmd_channels

    cmd_channels.add_verbs(verbs)
