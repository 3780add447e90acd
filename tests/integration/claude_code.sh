#!/usr/bin/env bash
# Claude Code CLI (@anthropic-ai/claude-code, pinned in tests/npm) registers autocomp-mcp over
# stdio and over Streamable HTTP (127.0.0.1) in a throw-away HOME, and `claude mcp list` /
# `claude mcp get` must report both connected. No login, no network: updates, telemetry and other
# non-essential traffic are switched off, and outbound HTTP(S) goes to a dead local proxy, so any
# attempt to leave the machine fails instead of succeeding quietly.
# usage: claude_code.sh [path/to/autocomp-mcp]
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../npm" && pwd)/common.sh"

# Claude Code's dual-era probe (server/discover) must be answered promptly; a server that makes it
# wait for its probe timeout shows up as a slow `claude mcp list`.
MAX_LIST_SECONDS=15

require_binary
npm_clients_install
claude_offline_sandbox

port=""
if ! start_http_server port; then
  fail "start HTTP server" "see messages above"
  finish
fi
http_url="http://127.0.0.1:$port/mcp"

rc=0; claude_cmd "$WORK_DIR/add-stdio.txt" mcp add autocomp -- "$BIN" || rc=$?
if ((rc == 0)); then pass "claude mcp add autocomp -- BIN"
else fail "claude mcp add (stdio)" "exit $rc"; show "$WORK_DIR/add-stdio.txt"; fi

rc=0; claude_cmd "$WORK_DIR/add-http.txt" mcp add --transport http autocomp-http "$http_url" || rc=$?
if ((rc == 0)); then pass "claude mcp add --transport http autocomp-http"
else fail "claude mcp add (http)" "exit $rc"; show "$WORK_DIR/add-http.txt"; fi

start_ns=$(date +%s%N)
rc=0; claude_cmd "$WORK_DIR/list.txt" mcp list || rc=$?
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
echo "claude mcp list (exit $rc, ${elapsed}s):"
show "$WORK_DIR/list.txt"
if grep -Eq "^autocomp: .* - ✔ Connected\$" "$WORK_DIR/list.txt"; then
  pass "claude mcp list: autocomp (stdio) ✔ Connected"
else
  fail "claude mcp list: autocomp (stdio)" "$(grep '^autocomp:' "$WORK_DIR/list.txt" || echo 'not listed')"
fi
if grep -Eq "^autocomp-http: .*\\(HTTP\\) - ✔ Connected\$" "$WORK_DIR/list.txt"; then
  pass "claude mcp list: autocomp-http (HTTP) ✔ Connected"
else
  fail "claude mcp list: autocomp-http (HTTP)" "$(grep '^autocomp-http:' "$WORK_DIR/list.txt" || echo 'not listed')"
fi
if ((elapsed_ms < MAX_LIST_SECONDS * 1000)); then
  pass "claude mcp list took ${elapsed}s (< ${MAX_LIST_SECONDS}s)"
else
  fail "claude mcp list speed" "took ${elapsed}s; is server/discover answered promptly?"
fi

for name in autocomp autocomp-http; do
  rc=0; claude_cmd "$WORK_DIR/get-$name.txt" mcp get "$name" || rc=$?
  if grep -q "Status: ✔ Connected" "$WORK_DIR/get-$name.txt"; then
    pass "claude mcp get $name: ✔ Connected"
  else
    fail "claude mcp get $name" "exit $rc"; show "$WORK_DIR/get-$name.txt"
  fi
done

if ! kill -0 "${SERVER_PIDS[$port]}" 2>/dev/null; then
  fail "HTTP server alive after Claude Code's checks" "server process exited"
  show_server_logs
fi

finish
