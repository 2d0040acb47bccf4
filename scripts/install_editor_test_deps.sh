#!/usr/bin/env bash
# Test-only: install the real yaml-language-server (VS Code's YAML engine) that tests/editor drives over LSP.
# Needs Node.js >= 18 and npm; installs the version pinned in tests/editor/package-lock.json into
# tests/editor/node_modules/ (git-ignored). Without it, tests/editor skips with a message; CI does not need npm.
set -euo pipefail
cd "$(dirname "$0")/../tests/editor"
npm ci --no-audit --no-fund
echo "yaml-language-server $(node -p 'require("yaml-language-server/package.json").version') installed in tests/editor/node_modules"
