"""`a44 automation compile FILE...`: print the IR of every workflow and trigger the files declare.

Diagnostics go to stderr in the text form; the IR (JSON) goes to stdout only when there is no error.
"""

from __future__ import annotations

import sys


def add_parser(subparsers):
    p = subparsers.add_parser("compile", help="compile YAML files and print their IR as JSON")
    p.add_argument("paths", nargs="+", metavar="FILE", help="workflow/trigger files or directories")
    p.add_argument("--publish-checks", action="store_true",
                   help="treat references the files cannot settle as errors, as publish does")
    p.add_argument("--compact", action="store_true", help="one line of JSON per document")
    return p


def run(args) -> int:
    import json

    from ..compiler.lint import lint_paths
    from ..diagnostics import Severity

    result = lint_paths(args.paths, mode="publish" if args.publish_checks else "lint", lower=True)
    for d in result.diagnostics:
        print(d.format(), file=sys.stderr)
    if any(d.severity is Severity.ERROR for d in result.diagnostics):
        return 1
    docs = [ir.model_dump(mode="json") for _, ir in sorted(result.irs.items())]
    if args.compact:
        for doc in docs:
            print(json.dumps(doc, sort_keys=True, separators=(",", ":")))
    else:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, sort_keys=True))
    return 0
