"""`a44 automation run WF --input JSON --idempotency-key K [--wait] [--timeout 60s]`: start a manual run.

Prints `run_<ULID> created` at once (or `run_<ULID> deduplicated (key age 0.4s)` when the key was used in the last
24 h: nothing is created). Execution is asynchronous; `--wait` then blocks until the run ends and prints how.
Exit codes: 0 started (or, with --wait, succeeded); 1 the run ended partial / failed / compensation_failed / cancelled, or a
database error; 2 usage: no --idempotency-key, --input not a JSON object, bad --timeout; 124 --timeout elapsed
while the run was still going (it keeps running).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import EXIT_ERROR, EXIT_OK, EXIT_TIMEOUT
from .output import (
    add_common_options,
    add_target_options,
    exit_code,
    json_document,
    ms,
    print_error,
    run_api,
    usage_error,
    warn_without_daemon,
    write,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run", help="start a run of a published workflow (needs --idempotency-key)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workflow", metavar="WF", help="workflow id (wf_invoice_settle) or name (invoice-settle)")
    p.add_argument("--input", "-i", default="{}", metavar="JSON",
                   help="the run's input: a JSON object, @FILE to read one, @- for stdin (default: {})")
    p.add_argument("--idempotency-key", "-k", metavar="K",
                   help="required: the same K within 24 h returns the original run and creates nothing")
    p.add_argument("--signal", action="append", default=[], metavar="NAME=JSON",
                   help="send this signal to the run once started (repeatable; its key is derived from the run's "
                        "idempotency key, so running the command again sends nothing new)")
    p.add_argument("--wait", "-w", action="store_true", help="block until the run ends; exit 1 if it failed")
    p.add_argument("--timeout", metavar="DURATION", help="with --wait: give up waiting after this long (60s, 5m)")
    add_common_options(p)
    add_target_options(p)
    return p


def parse_input(text: str) -> dict:
    """--input as a JSON object; `@path` reads a file, `@-` stdin. ValueError says what is wrong."""
    source = "--input"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
        except OSError as exc:
            raise ValueError(f"cannot read --input file {source}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{source} must be a JSON object (the run's `input`), not {type(value).__name__}")
    return value


def parse_signal(text: str) -> tuple[str, object]:
    """`--signal NAME=JSON` (or a bare NAME: data null). ValueError says what is wrong."""
    name, _, data = text.partition("=")
    try:
        return name, json.loads(data) if data else None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--signal {name}: the data is not valid JSON: {exc.msg}") from None


def run(args: argparse.Namespace) -> int:
    from ..api import parse_duration, require_idempotency_key
    from ..errors import A44Error

    # usage problems are reported before touching the database (which may have to be started)
    try:
        require_idempotency_key(args.idempotency_key)
    except A44Error as exc:
        print_error(exc)
        return exit_code(exc)
    try:
        args.input_value = parse_input(args.input)
    except ValueError as exc:
        return usage_error(str(exc), hint='e.g. --input \'{"invoiceId":"inv_8812"}\'')
    try:
        args.signals = [parse_signal(text) for text in args.signal]
    except ValueError as exc:
        return usage_error(str(exc), hint="e.g. --signal 'approved={\"by\":\"ana\"}'")
    if args.timeout is not None:
        if not args.wait:
            return usage_error("--timeout only applies with --wait")
        try:
            parse_duration(args.timeout)
        except ValueError as exc:
            return usage_error(str(exc))
    return run_api(_run, args)


async def _run(auto, args) -> int:
    from ..app.approvals import local_person

    # a local call's initiator is its os user; a remote one's the token's name (recorded by the daemon)
    handle = await auto.run(args.workflow, args.input_value, args.idempotency_key, initiator=local_person())
    for i, (name, data) in enumerate(args.signals):
        # buffered until the run's wait opens on it; the derived key makes the command safe to repeat
        await auto.signal(handle.run_id, name, data, key=f"run:{args.idempotency_key}:{i}", by="local:cli")
    if args.format == "text":
        write(started_line(handle))
    await warn_without_daemon(auto)
    if not args.wait:
        if args.format == "json":
            write(json_document(handle.to_dict()))
        return EXIT_OK
    run, timed_out = await auto.wait(handle.run_id, args.timeout)
    if args.format == "json":
        doc = handle.to_dict() | {"run": run, "timed_out": timed_out}
        write(json_document(doc))
    else:
        write(ended_line(run, timed_out, args.timeout))
    if timed_out:
        return EXIT_TIMEOUT
    return EXIT_OK if run["state"] == "succeeded" else EXIT_ERROR


def started_line(handle) -> str:
    if handle.created:
        return f"{handle.run_id} created\n"
    age = handle.key_age_seconds
    # as the manual prints it: `key age 0.4s`; a key hours old reads better as 2h03m
    shown = f"{age:.1f}s" if age < 60 else ms(round(age * 1000))
    return f"{handle.run_id} deduplicated (key age {shown})\n"


def ended_line(run: dict, timed_out: bool, timeout: str | None) -> str:
    rid, state = run["run_id"], run["state"]
    if timed_out:
        return f"{rid} still {state} after {timeout}; it keeps running (a44 automation logs {rid} --follow)\n"
    if state == "succeeded":
        return f"{rid} succeeded in {ms(run['duration_ms'])}\n"
    step = run.get("failed_step") or run.get("current_step")
    line = f"{rid} {state}" + (f" at step {step}" if step else "")
    if run.get("error_code"):
        line += f": {run['error_code']}" + (f" {run['error_message']}" if run.get("error_message") else "")
    return line + f"\n  see: a44 automation logs {rid}\n"
