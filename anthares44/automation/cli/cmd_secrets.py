"""`a44 automation secrets set|list|rm|rotate-key`: the encrypted secret file `$A44_HOME/secrets.json`.

`set NAME` reads the value from stdin (or `--file F`), never from the command line, where it would land in the shell
history and the process list; one trailing newline is removed. Values are encrypted (AES-256-GCM) with the key in
`A44_SECRET_KEY` or `$A44_HOME/secret.key` (created 0600 on the first `set`); the file is 0600 too. `list` prints
names only. `rm NAME` deletes one. `rotate-key` seals every secret again with a new key (random, or hex from
`--key-file F` / `--key-stdin`) that becomes `secret.key`, and keeps the old key as `secret.key.<kid>.old`.
A variable `A44_SECRET_<NAME>` overrides the file at run time (runtime/secrets/source.py, runtime/secrets/file.py).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import EXIT_ERROR, EXIT_OK
from .output import FORMATS, print_error, settings_of, usage_error


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("secrets", help="manage the encrypted secrets connectors reference",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="secrets_verb", metavar="VERB", required=True)
    s = verbs.add_parser("set", help="store a secret (value from stdin or --file, never from argv)")
    s.add_argument("name", help="secret id, sec_...")
    s.add_argument("--file", metavar="F", help="read the value from this file instead of stdin")
    ls = verbs.add_parser("list", help="secret names (never values)")
    rm = verbs.add_parser("rm", help="delete a secret")
    rm.add_argument("name")
    rot = verbs.add_parser("rotate-key", help="re-encrypt every secret with a new key; the old key is kept aside")
    given = rot.add_mutually_exclusive_group()
    given.add_argument("--key-file", metavar="F", help="the new key, 64 hex characters, from this file")
    given.add_argument("--key-stdin", action="store_true", help="the new key, 64 hex characters, from stdin")
    for verb in (s, ls, rm, rot):
        verb.add_argument("--format", "-f", choices=FORMATS, default="text", help="output format (default: text)")
    return parser


def _done(args, text: str, doc: dict) -> None:
    """What a changing verb did: on stderr as text (stdout stays empty for scripts), or one JSON object on stdout."""
    if args.format == "json":
        print(json.dumps(doc))
    else:
        print(text, file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ..app.secrets import is_secret_id, read_key, secret_file
    from ..errors import A44Error

    f = secret_file(settings_of(args))
    try:
        if args.secrets_verb == "set":
            if not is_secret_id(args.name):
                return usage_error(f"{args.name!r} is not a secret id", "use sec_ followed by letters, digits or _")
            if args.file:
                with open(args.file, encoding="utf-8") as fh:
                    value = fh.read()
            else:
                if sys.stdin.isatty():
                    print("value (end with Ctrl-D):", file=sys.stderr)
                value = sys.stdin.read()
            value = value[:-1] if value.endswith("\n") else value
            if not value:
                return usage_error("the secret value is empty")
            f.set(args.name, value)
            _done(args, f"stored {args.name} in {f.path}", {"stored": args.name, "file": str(f.path)})
        elif args.secrets_verb == "list":
            names = f.names()
            if args.format == "json":
                print(json.dumps(names))
            else:
                for n in names:
                    print(n)
        elif args.secrets_verb == "rm":
            if not f.remove(args.name):
                print(f"E_SECRET_NOT_FOUND no secret {args.name} in {f.path}", file=sys.stderr)
                return EXIT_ERROR
            _done(args, f"removed {args.name} from {f.path}", {"removed": args.name, "file": str(f.path)})
        elif args.secrets_verb == "rotate-key":
            new = None
            if args.key_file:
                with open(args.key_file, encoding="ascii", errors="replace") as fh:
                    new = read_key(fh.read(), args.key_file)
            elif args.key_stdin:
                new = read_key(sys.stdin.read(), "stdin")
            out = f.rotate_key(new)
            if args.format == "json":
                print(json.dumps({**out, "file": str(f.path), "key_file": str(f.key_path)}, default=str))
            print(f"re-encrypted {out['entries']} secret(s) in {f.path} with key {out['new_kid']} ({f.key_path})",
                  file=sys.stderr)
            if out["backup"]:
                print(f"the previous key {out['old_kid']} is kept in {out['backup']}: delete it once no copy of the "
                      f"previous secrets.json needs it", file=sys.stderr)
    except A44Error as exc:
        print_error(exc)
        return EXIT_ERROR
    except OSError as exc:
        from ..errors import E_FILE_ACCESS

        print_error(A44Error(E_FILE_ACCESS, f"{exc.filename or 'a file'}: {exc.strerror or exc}",
                             hint="check the path and its permissions"))
        return EXIT_ERROR
    return EXIT_OK
