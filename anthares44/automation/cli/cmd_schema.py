"""The `a44 automation schema` verb: prints (or writes, or checks) the JSON Schemas editors use.

`--kind K` prints one kind's schema to stdout; `--write DIR` regenerates every kind's file in DIR (the committed
`schemas/`); `--check DIR` exits 1 when the files in DIR are missing or stale, for CI and pre-commit.
The generator lives in `compiler/jsonschema.py` and is imported only when the verb runs (it loads pydantic).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_FINDINGS, EXIT_OK

KINDS = ("workflow", "triggers", "connectors", "queues", "alerts", "channels", "approvers", "any")  # kept equal to jsonschema.KINDS by a test


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "schema", help="print or write the JSON Schemas of the YAML files (for editors)",
        description="Print the draft-07 JSON Schema of one file kind, or regenerate all of them with --write. "
                    "Editors (yaml-language-server, VS Code) use them for completion and inline errors.")
    parser.add_argument("--kind", choices=KINDS, default="any",
                        help="file kind whose schema is printed (default: any, which accepts every kind)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="DIR", help="write every kind's <kind>.schema.json into DIR")
    mode.add_argument("--check", metavar="DIR",
                      help="exit 1 if the schema files in DIR are missing or differ from a fresh generation")
    return parser


def run(args: argparse.Namespace) -> int:
    from anthares44.automation.compiler import jsonschema

    if args.write:
        for path in jsonschema.write_all(args.write):
            print(f"wrote {path}", file=sys.stderr)
        return EXIT_OK
    if args.check:
        stale = jsonschema.stale_files(args.check)
        for path in stale:
            print(f"{path}: missing or stale; run `a44 automation schema --write {args.check}`", file=sys.stderr)
        return EXIT_FINDINGS if stale else EXIT_OK
    sys.stdout.write(jsonschema.render(jsonschema.generate(args.kind)))
    return EXIT_OK
