"""`a44 automation test [DIR...] [--format text|junit|json] [--output FILE]`: run the `*.a44test.yaml` files under DIR
(default `.`) with the test kit (testkit/yaml_tests.py), each case on a fresh database and virtual time; exit 0
when every case passed, 1 when one failed, 2 when no test file was found."""

from __future__ import annotations

import sys

from ..errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE


def add_parser(subparsers):
    p = subparsers.add_parser("test", help="run the declarative tests (*.a44test.yaml) under the test kit")
    p.add_argument("paths", nargs="*", metavar="DIR", help="test files or directories (default: .)")
    p.add_argument("--format", choices=("text", "junit", "json"), default="text",
                   help="text (default), JUnit XML for CI, or json")
    p.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    return p


def run(args) -> int:
    import json

    from ..testkit.yaml_tests import SUFFIX, find_test_files, junit_report, run_paths, text_report

    paths = args.paths or ["."]
    try:
        if not find_test_files(paths):
            print(f"a44: no *{SUFFIX} file under {' '.join(paths)}", file=sys.stderr)
            return EXIT_USAGE
    except FileNotFoundError as exc:
        print(f"a44: {exc}", file=sys.stderr)
        return EXIT_USAGE
    results = run_paths(paths)
    if args.format == "json":
        report = json.dumps([r.to_dict() for r in results], indent=2) + "\n"
    else:
        report = junit_report(results) if args.format == "junit" else text_report(results)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(report)
        passed = sum(r.passed for r in results)
        print(f"{passed} passed, {len(results) - passed} failed", file=sys.stderr)
    else:
        sys.stdout.write(report)
    return EXIT_OK if all(r.passed for r in results) else EXIT_FINDINGS
