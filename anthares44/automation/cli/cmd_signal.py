"""`a44 automation signal RUN NAME [--data JSON] [--idempotency-key K]`

Sends a signal to a run (docs/waits.md): consumed by the run's open `wait: {signal: NAME}` step, or buffered
until one opens; signals of one name are consumed in the order sent, each once. A repeated --idempotency-key
answers the first signal (`duplicate`). Refused: an unknown run (E_RUN_NOT_FOUND), a finished one
(E_SIGNAL_RUN_FINISHED, with its state), data over 256 KB (E_SIGNAL_TOO_LARGE). Exit 0 when recorded.
"""

from __future__ import annotations

import argparse
import json

from ..errors import E_SIGNAL_INVALID, EXIT_OK, A44Error
from .output import add_common_options, add_target_options, decided_by, json_document, run_api, write


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("signal", help="send a signal to a run (its wait step consumes it)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_id", metavar="RUN", help="the run")
    p.add_argument("name", metavar="NAME", help="the signal's name, as its `wait: {signal: NAME}`")
    p.add_argument("--data", metavar="JSON", help="the signal's data, a JSON value (default null)")
    p.add_argument("--idempotency-key", metavar="K", help="sending the same key again records nothing new")
    add_common_options(p)
    add_target_options(p)
    return p


def parse_data(text: str | None):
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise A44Error(E_SIGNAL_INVALID, f"--data is not JSON: {exc}") from None


def run(args: argparse.Namespace) -> int:
    return run_api(_signal, args)


async def _signal(auto, args) -> int:
    result = await auto.signal(args.run_id, args.name, parse_data(args.data), key=args.idempotency_key,
                               by=f"local:{decided_by(None)}")
    if args.format == "json":
        write(json_document(result))
    else:
        what = {"delivered": "delivered to its open wait", "buffered": "buffered until a wait opens on it",
                "duplicate": "already sent with this idempotency key"}[result["outcome"]]
        write(f"{args.run_id} signal {args.name} #{result['seq']}: {what}\n")
    return EXIT_OK
