#!/usr/bin/env bash
# Official MCP conformance suite (@modelcontextprotocol/conformance, pinned in tests/npm) against
# autocomp-mcp's Streamable HTTP transport on 127.0.0.1. One server serves both protocol eras.
#   1. With --conformance-fixtures, once per revision: every server scenario of the 2025-11-25
#      requirement set (legacy wire: initialize, sessions) and of the 2026-07-28 set (stateless
#      wire: per-request _meta, server/discover), each with its own baseline
#      (tests/npm/conformance-expected-failures[-REV].yml; one check per scenario, plus the
#      suite's own baseline verdict). The scenarios a revision lists as not scored (the tasks
#      extension io.modelcontextprotocol/tasks, scenarios pending in the suite) are held to the
#      same bar here: each is one check, so a regression in task input (input_required,
#      tasks/update) fails the run.
#   2. Without fixtures (the product tool set): the generic scenarios, one check each, at both
#      revisions.
# usage: conformance.sh [path/to/autocomp-mcp]
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../npm" && pwd)/common.sh"

REVISIONS=(2025-11-25 2026-07-28)
baseline_for() {
  if [[ "$1" == 2025-11-25 ]]; then
    echo "$NPM_DIR/conformance-expected-failures.yml"
  else
    echo "$NPM_DIR/conformance-expected-failures-$1.yml"
  fi
}
# Generic scenarios that need no fixture tools; they must pass against the product tool set.
GENERIC_SCENARIOS=(
  server-initialize
  ping
  tools-list
  logging-set-level
  dns-rebinding-protection
  server-sse-multiple-streams
  server-session-lifecycle
)
# The same for the stateless revision (its requirement set has no session, ping or log level;
# server-stateless needs fixture tools, so it runs with the fixtures only).
GENERIC_SCENARIOS_MODERN=(
  tools-list
  caching
  dns-rebinding-protection
  server-sse-multiple-streams
)

require_binary
npm_clients_install
CONFORMANCE=("$NODE22" "$NPM_BIN/conformance")

# Runs the summary helper on one results folder and turns its verdicts into checks.
record_results() {
  local line status name rest
  while IFS= read -r line; do
    if [[ "$line" == "CHECK "* ]]; then
      read -r _ status name rest <<<"$line"
      if [[ "$status" == PASS ]]; then pass "$name ($rest)"; else fail "$name" "$rest"; fi
    else
      printf '%s\n' "$line"
    fi
  done < <("$NODE22" "$NPM_DIR/conformance_summary.mjs" "$@")
}

for REQUIREMENTS in "${REVISIONS[@]}"; do
  BASELINE="$(baseline_for "$REQUIREMENTS")"
  echo "== conformance $REQUIREMENTS requirement set, fixtures on"
  port=""
  if start_http_server port --conformance-fixtures; then
    url="http://127.0.0.1:$port/mcp"
    results="$WORK_DIR/results-fixtures-$REQUIREMENTS"
    log="$WORK_DIR/conformance-fixtures-$REQUIREMENTS.log"
    set +e
    (cd "$WORK_DIR" && timeout 600 "${CONFORMANCE[@]}" server --url "$url" \
        --requirements "$REQUIREMENTS" --expected-failures "$BASELINE" \
        -o "$results" --timeout 30000) >"$log" 2>&1
    rc=$?
    set -e
    # The suite's own summary (scenario lines, totals, baseline verdict), without colour codes.
    sed -e 's/\x1b\[[0-9;]*m//g' "$log" | sed -n '/=== SUMMARY ===/,$p'
    record_results --results "$results" --label "$REQUIREMENTS" \
      --requirements "$REQUIREMENTS" --score-not-scored --expected-failures "$BASELINE"
    if ((rc == 0)); then
      pass "conformance $REQUIREMENTS baseline verdict (exit 0)"
    else
      fail "conformance $REQUIREMENTS baseline verdict" "conformance exited $rc"
    fi
    if ! kill -0 "${SERVER_PIDS[$port]}" 2>/dev/null; then
      fail "server alive after the $REQUIREMENTS requirement set" "server process exited"
      show_server_logs
    fi
    stop_server "$port"
  else
    fail "start server with --conformance-fixtures" "see messages above"
  fi
  echo
done

echo "== generic scenarios against the product tool set (no fixtures)"
if start_http_server port; then
  url="http://127.0.0.1:$port/mcp"
  for REQUIREMENTS in "${REVISIONS[@]}"; do
    if [[ "$REQUIREMENTS" == 2025-11-25 ]]; then
      scenarios=("${GENERIC_SCENARIOS[@]}")
    else
      scenarios=("${GENERIC_SCENARIOS_MODERN[@]}")
    fi
    results="$WORK_DIR/results-product-$REQUIREMENTS"
    for scenario in "${scenarios[@]}"; do
      (cd "$WORK_DIR" && timeout 120 "${CONFORMANCE[@]}" server --url "$url" \
          --scenario "$scenario" --spec-version "$REQUIREMENTS" -o "$results" --timeout 30000) \
          >"$WORK_DIR/conformance-$scenario-$REQUIREMENTS.log" 2>&1 || true
    done
    generic_csv="$(IFS=,; echo "${scenarios[*]}")"
    record_results --results "$results" --label "product-$REQUIREMENTS" --expect "$generic_csv"
  done
  if ! kill -0 "${SERVER_PIDS[$port]}" 2>/dev/null; then
    fail "server alive after the generic scenarios" "server process exited"
    show_server_logs
  fi
  stop_server "$port"
else
  fail "start server without fixtures" "see messages above"
fi

finish
