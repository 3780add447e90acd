#!/usr/bin/env bash
# Scripted MCP client over stdio with the official TypeScript SDK v1 (Client +
# StdioClientTransport): initialize, paginated tools/list, progress, cancellation through an
# AbortSignal (the server must keep serving), logging, resources and prompts, clean exit on EOF.
# The server runs with --conformance-fixtures for its fixture tools. The checks themselves are in
# tests/npm/stdio_client_check.mjs.
# usage: sdk_stdio.sh [path/to/autocomp-mcp]
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../npm" && pwd)/common.sh"

require_binary
npm_clients_install

rc=0
timeout 180 "$NODE22" "$NPM_DIR/stdio_client_check.mjs" "$BIN" >"$WORK_DIR/sdk.out" 2>&1 || rc=$?
while IFS= read -r line; do
  if [[ "$line" == "CHECK PASS "* ]]; then
    pass "${line#CHECK PASS }"
  elif [[ "$line" == "CHECK FAIL "* ]]; then
    rest="${line#CHECK FAIL }"
    fail "${rest%% :: *}" "${rest#* :: }"
  else
    printf '%s\n' "$line"
  fi
done <"$WORK_DIR/sdk.out"
if ((rc == 124)); then
  fail "SDK client run" "timed out after 180 s"
elif ((rc != 0 && CHECKS_FAILED == 0)); then
  fail "SDK client run" "exited $rc without reporting a failed check"
fi

finish
