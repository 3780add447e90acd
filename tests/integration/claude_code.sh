#!/usr/bin/env bash
# Claude Code CLI (@anthropic-ai/claude-code, pinned in tests/npm) registers autocomp-mcp over
# stdio and over Streamable HTTP (127.0.0.1) in a throw-away HOME, and `claude mcp list` must report
# both connected in all four client wires (MCP_SDK_GENERATION v1/v2 x MCP_PROTOCOL_NEGOTIATION
# auto/legacy), each reaching the protocol era expected of it (read from the server's log), and
# `claude mcp get` both connected. No login, no network: updates, telemetry and other
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

# The stdio server's stderr (its log) goes to one file, so each wire's era can be read from it.
stdio_log="$WORK_DIR/stdio-server.log"
stdio_wrapper="$WORK_DIR/stdio-server.sh"
printf '#!/bin/sh\nexec "%s" "$@" 2>>"%s"\n' "$BIN" "$stdio_log" >"$stdio_wrapper"
chmod +x "$stdio_wrapper"
: >"$stdio_log"
http_log="$WORK_DIR/server-1.log"

rc=0; claude_cmd "$WORK_DIR/add-stdio.txt" mcp add autocomp -- "$stdio_wrapper" || rc=$?
if ((rc == 0)); then pass "claude mcp add autocomp -- BIN"
else fail "claude mcp add (stdio)" "exit $rc"; show "$WORK_DIR/add-stdio.txt"; fi

rc=0; claude_cmd "$WORK_DIR/add-http.txt" mcp add --transport http autocomp-http "$http_url" || rc=$?
if ((rc == 0)); then pass "claude mcp add --transport http autocomp-http"
else fail "claude mcp add (http)" "exit $rc"; show "$WORK_DIR/add-http.txt"; fi

# Whether this binary serves the 2026-07-28 era (answers server/discover with a result).
modern_era=0
discover='{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"}}}}'
if printf '%s\n' "$discover" | timeout 10 "$BIN" 2>/dev/null | grep -q '"result"'; then
  modern_era=1
fi
echo "server answers server/discover: $([[ $modern_era == 1 ]] && echo yes || echo no)"

# era_since LOG LINE: the era the server logged after line LINE of LOG: "2026-07-28" for a
# stateless (modern) exchange, the negotiated version of an initialize, or "none".
era_since() {
  local new
  new="$(tail -n +"$(($2 + 1))" "$1" 2>/dev/null || true)"
  if grep -v 'session initialized' <<<"$new" | grep -q '2026-07-28'; then
    echo 2026-07-28
  elif grep -q 'session initialized' <<<"$new"; then
    grep -o 'session initialized: .*, protocol [0-9-]*' <<<"$new" | tail -n 1 | sed 's/.*protocol //'
  else
    echo none
  fi
}

# The era a wire should reach: v1 never probes, `legacy` probes nothing; v2 + auto reaches
# 2026-07-28 once the server serves it.
expected_era() {
  if [[ $1 == v2 && $2 == auto && $modern_era == 1 ]]; then echo 2026-07-28; else echo 2025-11-25; fi
}

ERA_SUMMARY=()
for generation in v1 v2; do
  for negotiation in auto legacy; do
    wire="MCP_SDK_GENERATION=$generation MCP_PROTOCOL_NEGOTIATION=$negotiation"
    stdio_mark=$(wc -l <"$stdio_log")
    http_mark=$(wc -l <"$http_log" 2>/dev/null || echo 0)
    out="$WORK_DIR/list-$generation-$negotiation.txt"
    start_ns=$(date +%s%N)
    rc=0
    MCP_SDK_GENERATION=$generation MCP_PROTOCOL_NEGOTIATION=$negotiation \
      claude_cmd "$out" mcp list || rc=$?
    elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
    elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
    echo "[$wire] claude mcp list (exit $rc, ${elapsed}s):"
    show "$out"
    if grep -Eq "^autocomp: .* - ✔ Connected\$" "$out"; then
      pass "[$wire] autocomp (stdio) ✔ Connected"
    else
      fail "[$wire] autocomp (stdio)" "$(grep '^autocomp:' "$out" || echo 'not listed')"
    fi
    if grep -Eq "^autocomp-http: .*\\(HTTP\\) - ✔ Connected\$" "$out"; then
      pass "[$wire] autocomp-http (HTTP) ✔ Connected"
    else
      fail "[$wire] autocomp-http (HTTP)" "$(grep '^autocomp-http:' "$out" || echo 'not listed')"
    fi
    if ((elapsed_ms < MAX_LIST_SECONDS * 1000)); then
      pass "[$wire] claude mcp list took ${elapsed}s (< ${MAX_LIST_SECONDS}s)"
    else
      fail "[$wire] claude mcp list speed" "took ${elapsed}s; is server/discover answered promptly?"
    fi
    want="$(expected_era "$generation" "$negotiation")"
    for transport in stdio http; do
      if [[ $transport == stdio ]]; then era="$(era_since "$stdio_log" "$stdio_mark")"
      else era="$(era_since "$http_log" "$http_mark")"; fi
      ERA_SUMMARY+=("$generation/$negotiation/$transport: $era")
      # Until the server serves 2026-07-28 every wire must still have negotiated 2025-11-25.
      if [[ $era == "$want" ]]; then
        pass "[$wire] $transport negotiated $era"
      else
        fail "[$wire] $transport era" "negotiated '$era', expected $want"
      fi
    done
  done
done
echo "eras negotiated (generation/negotiation/transport):"
printf '  %s\n' "${ERA_SUMMARY[@]}"

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
