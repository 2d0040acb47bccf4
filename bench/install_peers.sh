#!/usr/bin/env bash
# Install the benchmark's peers (bench/bench_runtime.py compares a44 with them) into bench/.peers/ (gitignored),
# never into the project's environment:
#   bench/.peers/venv/   a Python venv with DBOS, the Restate Python SDK, hypercorn, aiohttp, asyncpg
#   bench/.peers/node/   the Restate server from npm (@restatedev/restate-server, a binary shipped in the package)
# Usage: bash bench/install_peers.sh     (idempotent; a few minutes the first time)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
peers="$here/.peers"
mkdir -p "$peers/node"
if [ ! -x "$peers/venv/bin/python" ]; then
  python3 -m venv "$peers/venv"
fi
"$peers/venv/bin/pip" install -q --upgrade pip
"$peers/venv/bin/pip" install -q "dbos>=1.0" "restate-sdk[serde]>=0.8" hypercorn aiohttp asyncpg psycopg[binary]
npm install --silent --no-audit --no-fund --prefix "$peers/node" @restatedev/restate-server
echo "peers installed in $peers:"
"$peers/venv/bin/python" -c "import importlib.metadata as m; print(' dbos', m.version('dbos'), '| restate-sdk', m.version('restate-sdk'), '| hypercorn', m.version('hypercorn'))"
ls "$peers"/node/node_modules/@restatedev/restate-server-*/bin/restate-server && "$peers/node/node_modules/.bin/restate-server" --version | head -1
