"""`a44 automation connectors list`: the connectors this installation can run, and where each comes from.

Built-ins are listed with the module that implements them, plugins with the distribution (name and version) and
the entry point (`anthares44.automation.connectors`) that provides them. `--format json` prints a JSON array of
`{uses, name, source, value, params}`; `params` lists the fields of the connector's parameter model, when it has
one. A plugin is not imported to be listed, so a broken plugin still shows where it comes from.
"""

from __future__ import annotations

import argparse
import json
import sys

from .output import EXIT_OK, FORMATS, table


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("connectors", help="list the installed connectors and where they come from",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="connectors_verb", metavar="VERB", required=True)
    ls = verbs.add_parser("list", help="built-in and plugin connectors")
    ls.add_argument("--format", "-f", choices=FORMATS, default="text", help="output format (default: text)")
    return parser


def installed() -> list[dict]:
    from ..stdlib_connectors.registry import _BUILTINS, ConnectorRegistry
    from ..compiler.models.params import BUILTIN_PARAMS

    reg = ConnectorRegistry()
    out = []
    for d in reg.list_installed():
        d = dict(d)
        if d["source"] == "builtin":
            d["value"] = _BUILTINS[d["uses"]]
            model = BUILTIN_PARAMS.get(d["uses"])
            d["source"] = "builtin (anthares44-automation)"
            if model is not None:
                d["params"] = sorted(f.alias or n for n, f in model.model_fields.items())
        out.append(d)
    return out


def run(args: argparse.Namespace) -> int:
    rows = installed()
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    sys.stdout.write(table(["USES", "SOURCE", "FROM"], [[r["uses"], r["source"], r.get("value", "")] for r in rows]))
    return EXIT_OK
