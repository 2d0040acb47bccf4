#!/usr/bin/env bash
# The main job, end to end on a laptop: the embedded PostgreSQL, the examples published, the interpreter daemon,
# a run completing, its log, and the idempotency key deduplicating a repeat. With the example payments plugin
# installed (pip install -e examples/plugins/a44-payments), against a loopback stand-in of the payments API, it
# also settles an invoice with the manual's invoice-settle plus the `params:` line it lacks (the main path), then,
# as a labelled act 2, runs the manual's example exactly as written, which must fail and compensate.
#
#   python3 -m venv .venv && . .venv/bin/activate && pip install -e . -e examples/plugins/a44-payments && examples/demo.sh
#
# Uses $A44_HOME (default ~/.a44) for the embedded database, or A44_DATABASE_URL if set (then invoice-settle needs
# A44_APP_DATABASE_URL: the database its SQL runs on, never the control store). Stops everything it
# started (the daemon, the stand-in, and the embedded server if it was not already running). Exit 0 only when
# the hello run succeeded and, with the plugin, the settled invoice-settle succeeded and act 2 failed and
# compensated.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"          # examples/: the manual's paths (./workflows/...) are relative to it
A44=${A44:-a44}
command -v "$A44" >/dev/null || { echo "demo: '$A44' not found; install the package first (pip install -e .)" >&2; exit 2; }
A44_PATH=$(command -v "$A44")
PY=${PYTHON:-$(dirname "$A44_PATH")/python}
[ -x "$PY" ] || PY=python3

WORK=$(mktemp -d "${TMPDIR:-/tmp}/a44-demo.XXXXXX")
SERVE_PID="" STANDIN_PID="" STOP_DB=0

if [ -t 1 ]; then say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }; else say() { printf '\n== %s\n' "$*"; }; fi

cleanup() {
  local rc=$?
  set +e
  if [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  fi
  if [ -n "$STANDIN_PID" ] && kill -0 "$STANDIN_PID" 2>/dev/null; then
    kill -TERM "$STANDIN_PID"; wait "$STANDIN_PID" 2>/dev/null
  fi
  if [ "$rc" -ne 0 ] && [ -s "$WORK/serve.log" ]; then
    echo "--- last lines of the daemon's log ($WORK/serve.log) ---" >&2
    tail -n 30 "$WORK/serve.log" >&2
  fi
  if [ "$STOP_DB" = 1 ]; then "$A44" automation db stop >/dev/null; fi
  [ "$rc" -eq 0 ] && rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

has_plugin() {
  "$PY" - <<'EOF' 2>/dev/null
import sys
from importlib.metadata import entry_points
names = {ep.name for ep in entry_points(group="anthares44.automation.connectors")}
sys.exit(0 if {"payments.authorize", "payments.void"} <= names else 1)
EOF
}

# --- 1. the database -------------------------------------------------------------------------------------------
say "database"
if [ -z "${A44_DATABASE_URL:-}" ]; then
  if ! "$A44" automation db status >/dev/null 2>&1; then STOP_DB=1; fi
  "$A44" automation db start
else
  echo "using A44_DATABASE_URL"
fi
"$A44" automation db migrate >/dev/null

# --- 2. publish ------------------------------------------------------------------------------------------------
say "publish"
PLUGIN=0
if has_plugin; then PLUGIN=1; fi
"$A44" automation publish ./workflows/hello.yaml
if [ "$PLUGIN" = 1 ]; then
  "$A44" automation publish ./workflows/invoice-settle.yaml
else
  echo "(the a44-payments plugin is not installed: skipping invoice-settle; pip install -e examples/plugins/a44-payments)"
fi

# --- 3. the payments stand-in and the daemon -------------------------------------------------------------------
if [ "$PLUGIN" = 1 ] && [ -z "${A44_PAYMENTS_URL:-}" ]; then
  say "payments API stand-in"
  "$PY" -m a44_payments.standin --port 0 >"$WORK/standin.log" 2>&1 &
  STANDIN_PID=$!
  for _ in $(seq 100); do
    grep -q "listening on" "$WORK/standin.log" 2>/dev/null && break
    kill -0 "$STANDIN_PID" 2>/dev/null || { cat "$WORK/standin.log" >&2; exit 1; }
    sleep 0.1
  done
  A44_PAYMENTS_URL=$(sed -n 's/.*listening on //p' "$WORK/standin.log" | head -n 1)
  [ -n "$A44_PAYMENTS_URL" ] || { echo "demo: the stand-in did not start" >&2; exit 1; }
  export A44_PAYMENTS_URL
  cat "$WORK/standin.log"
fi

say "daemon"
"$A44" automation serve -v >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 150); do
  grep -q "serving worker=" "$WORK/serve.log" 2>/dev/null && break
  kill -0 "$SERVE_PID" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
  sleep 0.1
done
grep -m 1 "serving worker=" "$WORK/serve.log" || { echo "demo: the daemon did not start" >&2; exit 1; }

# --- 4. a run to completion, its log, and the key again --------------------------------------------------------
say "run hello (pass -> durable sleep 1s -> pass)"
KEY="demo-hello-$(date -u +%Y%m%dT%H%M%SZ)-$$"       # a fresh run per demo; a real key comes from the data
set +e
"$A44" automation run hello --input '{"name":"Ana"}' --idempotency-key "$KEY" --wait --timeout 60s | tee "$WORK/hello.out"
HELLO_RC=${PIPESTATUS[0]}
set -e
RUN_ID=$(awk 'NR==1 {print $1}' "$WORK/hello.out")

say "logs $RUN_ID"
"$A44" automation logs "$RUN_ID"

say "the same idempotency key again: no new run"
"$A44" automation run hello --input '{"name":"Ana"}' --idempotency-key "$KEY"

# --- 5. invoice-settle, settled: the main path ------------------------------------------------------------------
# The manual's invoice-settle as written cannot succeed (act 2 shows why). The main path runs it with the one line
# it lacks, as version 4: mark-paid's `$1` gets `params:` (lint warns A44501 without it).
INVOICE_OK=1
INV_ID="" ACT2_ID=""
AS_WRITTEN_PROJECT=pj_demo_as_written    # act 2's own project: one workflow version holds one text per project
if [ "$PLUGIN" = 1 ]; then
  say "invoice-settle: the manual's workflow with mark-paid's params: added (version 4)"
  # mark-paid updates `invoices`; the manual assumes the table exists in "the managed Postgres": the application
  # database, where workflow SQL runs (the embedded server's a44_app, or A44_APP_DATABASE_URL)
  APP_URL=$("$A44" automation db url --app)
  "$PY" - "$APP_URL" <<'EOF'
import asyncio, sys
import asyncpg

async def main(url):
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("create table if not exists invoices (id text primary key, status text not null)")
        await conn.execute("insert into invoices values ('inv_8812', 'open') on conflict (id) do nothing")
    finally:
        await conn.close()

asyncio.run(main(sys.argv[1]))
EOF
  mkdir -p "$WORK/settled/workflows"
  SETTLED="$WORK/settled/workflows/invoice-settle.yaml"
  { sed 's/^version: 3$/version: 4/' ./workflows/invoice-settle.yaml; echo '    params: ["{{ input.invoiceId }}"]'; } >"$SETTLED"
  diff -u --label "examples/workflows/invoice-settle.yaml (the manual)" --label "invoice-settle.yaml (settled)" \
    ./workflows/invoice-settle.yaml "$SETTLED" || true
  (cd "$WORK/settled" && "$A44" automation publish ./workflows/invoice-settle.yaml)
  echo '$ a44 automation run wf_invoice_settle --input '"'"'{"invoiceId":"inv_8812"}'"'"' --idempotency-key "manual-inv_8812-2026-07-19" --wait'
  set +e
  "$A44" automation run wf_invoice_settle \
    --input '{"invoiceId":"inv_8812"}' \
    --idempotency-key "manual-inv_8812-2026-07-19" --wait --timeout 60s | tee "$WORK/invoice.out"
  SETTLED_RC=${PIPESTATUS[0]}
  set -e
  INV_ID=$(awk 'NR==1 {print $1}' "$WORK/invoice.out")
  "$A44" automation logs "$INV_ID"
  [ "$SETTLED_RC" -eq 0 ] || INVOICE_OK=0

  # --- 6. act 2: the manual's example exactly as written, which fails and compensates ------------------------
  say "act 2: the manual's invoice-settle exactly as written (expected: failed and compensated)"
  # As written, mark-paid's `$1` has no `params:`, so PostgreSQL refuses the statement (E_SQL, permanent: no
  # retry) and the saga voids reserve-funds' authorization with payments.void: the run must end `failed` with the
  # compensation done; `succeeded` or `compensation_failed` would mean the demo no longer shows what it says.
  "$A44" automation publish --project "$AS_WRITTEN_PROJECT" ./workflows/invoice-settle.yaml
  echo '$ a44 automation run wf_invoice_settle --input '"'"'{"invoiceId":"inv_8812"}'"'"' --idempotency-key "manual-inv_8812-2026-07-19"'
  "$A44" automation run wf_invoice_settle --project "$AS_WRITTEN_PROJECT" \
    --input '{"invoiceId":"inv_8812"}' \
    --idempotency-key "manual-inv_8812-2026-07-19" | tee "$WORK/as-written.out"
  ACT2_ID=$(awk 'NR==1 {print $1}' "$WORK/as-written.out")
  echo "\$ a44 automation logs $ACT2_ID --follow"
  timeout 120 "$A44" automation logs "$ACT2_ID" --project "$AS_WRITTEN_PROJECT" --follow
  "$A44" automation logs "$ACT2_ID" --project "$AS_WRITTEN_PROJECT" --format json >"$WORK/as-written.json"
  ACT2=$("$PY" - "$WORK/as-written.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
run = doc["run"]
voided = any(a["step_id"] == "reserve-funds" and a["kind"] == "compensation" and a["status"] == "compensated"
             for a in doc["attempts"])
print(f"{run['state']} at {run.get('failed_step')} ({run.get('error_code')}), "
      f"reserve-funds {'compensated' if voided else 'NOT compensated'}")
EOF
)
  echo "expected: failed and compensated; got: $ACT2"
  if [ "$ACT2" = "failed at mark-paid (E_SQL), reserve-funds compensated" ]; then
    echo "act 2 as expected: the manual's example as written fails at mark-paid and voids the authorization"
  else
    echo "act 2 NOT as expected: the as-written example did not fail and compensate" >&2
    INVOICE_OK=0
  fi
fi

say "result"
if [ "$HELLO_RC" -eq 0 ] && [ "$INVOICE_OK" = 1 ]; then
  echo "demo OK: run $RUN_ID succeeded"
  if [ "$PLUGIN" = 1 ]; then
    echo "demo OK: invoice-settle run $INV_ID succeeded; act 2 run $ACT2_ID failed and compensated, as expected"
  fi
else
  echo "demo FAILED: hello exit $HELLO_RC, invoice-settle ok=$INVOICE_OK" >&2
  exit 1
fi
