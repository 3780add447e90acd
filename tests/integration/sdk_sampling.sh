#!/usr/bin/env bash
# The MCP client's own model through sampling, with the official TypeScript SDK v1 Client as the
# client (a fake model answers its sampling requests), over stdio and Streamable HTTP, with no
# --llm on the server: propose_plan gets its plans from the client; run_beam_search sends sampling
# requests while it runs in the background and reports model_source "client"; a client without
# sampling gets the planning prompt and an autotune-only search; a client without an open GET
# stream gets a search that finishes on autotuning and reports its failed requests. The checks
# themselves are in tests/npm/sdk_sampling_check.mjs.
# usage: sdk_sampling.sh [path/to/autocomp-mcp]
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../npm" && pwd)/common.sh"

require_binary
npm_clients_install

export AUTOCOMP_PYTHON="${AUTOCOMP_PYTHON:-/usr/bin/python3}"
unset OPENAI_API_KEY ANTHROPIC_API_KEY OPENAI_BASE_URL ANTHROPIC_BASE_URL

http_port=""
if ! start_http_server http_port --db "$WORK_DIR/http.db"; then
  fail "HTTP server start" "autocomp-mcp --http did not come up"
  finish
fi

rc=0
timeout 120 "$NODE22" "$NPM_DIR/sdk_sampling_check.mjs" "$BIN" "$WORK_DIR" "$http_port" \
  >"$WORK_DIR/sdk.out" 2>&1 || rc=$?
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
  fail "SDK sampling client run" "timed out after 120 s"
elif ((rc != 0 && CHECKS_FAILED == 0)); then
  fail "SDK sampling client run" "exited $rc without reporting a failed check"
fi
if ((CHECKS_FAILED > 0)); then
  show_server_logs
fi

finish
