"""The normalized schema of the `automation` schema, as `pg_dump --schema-only` prints it, and the command that
regenerates the committed `runtime/store/schema.sql`:

    .venv/bin/python -m anthares44.automation.runtime.store.schema_dump          # rewrite schema.sql
    .venv/bin/python -m anthares44.automation.runtime.store.schema_dump --check  # exit 1 if it differs

It migrates a fresh database on a throwaway embedded server and dumps it with the wheel's pg_dump. The monthly
step_attempts partitions are left out: which months exist depends on the day the dump is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ..postgres.embedded import EmbeddedServer, bin_dir, free_port

SCHEMA_FILE = Path(__file__).parent / "schema.sql"
HEADER = ("-- The automation schema produced by runtime/store/migrations/*.sql (generated; do not edit).\n"
          "-- Regenerate: .venv/bin/python -m anthares44.automation.runtime.store.schema_dump\n")
_DROP_LINE = re.compile(r"^(--.*|SET .*|SELECT pg_catalog\.set_config\(.*|\\(un)?restrict .*)$")


def normalize(dump: str) -> str:
    lines = [ln.rstrip() for ln in dump.splitlines() if not _DROP_LINE.match(ln.strip())]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return HEADER + "\n" + text + "\n"


def dump_schema(url: str) -> str:
    proc = subprocess.run([str(bin_dir() / "pg_dump"), "--schema-only", "--schema=automation", "--no-owner",
                           "--no-privileges", "--exclude-table=automation.step_attempts_y*", "-d", url],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"pg_dump failed: {proc.stderr.strip()}")
    return normalize(proc.stdout)


async def _migrate(url: str) -> None:
    from .core import Store

    store = await Store.connect(url, results_dir=Path(tempfile.gettempdir()))
    try:
        await store.migrate()
    finally:
        await store.close()


def fresh_schema() -> str:
    with tempfile.TemporaryDirectory(prefix="a44-schema-") as tmp:
        server = EmbeddedServer(Path(tmp), durable=False)
        server.initdb()
        st = server.start(free_port())
        try:
            url = f"postgresql://postgres@127.0.0.1:{st.port}/postgres"
            asyncio.run(_migrate(url))
            return dump_schema(url)
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = ap.parse_args(argv)
    schema = fresh_schema()
    if args.check:
        same = SCHEMA_FILE.exists() and SCHEMA_FILE.read_text() == schema
        print("schema.sql is up to date" if same else "schema.sql differs from the migrations; regenerate it")
        return 0 if same else 1
    SCHEMA_FILE.write_text(schema)
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
