#!/usr/bin/env bash
# MCP Inspector CLI (@modelcontextprotocol/inspector v2, pinned in tests/npm) against autocomp-mcp
# over stdio and over Streamable HTTP on 127.0.0.1: tools/list, a tools/call with arguments that
# break the input schema (the Inspector must exit 5: tool error), resources/list, prompts/list.
# Over stdio with --conformance-fixtures it also makes one successful call and one failing call.
# usage: inspector.sh [path/to/autocomp-mcp]
#   AUTOCOMP_EXPECTED_TOOLS="a b"  tool names that tools/list must contain (default below;
#                                  set it empty to only require a non-empty, well-formed list)
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../npm" && pwd)/common.sh"

read -r -a EXPECTED_TOOLS <<<"${AUTOCOMP_EXPECTED_TOOLS-verify_kernel benchmark_kernel profile_kernel}"
TOOL_ERROR_EXIT=5

require_binary
npm_clients_install

# The Inspector keeps a catalog and client config under HOME: give it a throw-away one.
export HOME="$WORK_DIR/home"
mkdir -p "$HOME"
export MCP_CATALOG_PATH="$HOME/mcp-catalog.json"
export MCP_CLIENT_CONFIG_PATH="$HOME/client.json"
INSPECTOR=("$NODE22" "$NPM_BIN/mcp-inspector" --cli)
JSONCHECK=("$NODE22" "$NPM_DIR/inspector_json.mjs")

# A stdio child started by the Inspector gets only a small default environment; hand it the
# variables the server reads (AUTOCOMP_*, XDG_DATA_HOME for its store) explicitly.
STDIO_ENV=(-e "XDG_DATA_HOME=$XDG_DATA_HOME")
while IFS='=' read -r name _; do
  [[ "$name" == AUTOCOMP_* ]] && STDIO_ENV+=(-e "$name=${!name}")
done < <(env)

# inspect OUT_PREFIX TARGET... -- ARGS...: runs the Inspector with a 60 s bound; stdout to
# OUT_PREFIX.out, stderr to OUT_PREFIX.err; returns the Inspector's exit code.
inspect() {
  local out="$1"
  shift
  local rc=0
  timeout 60 "${INSPECTOR[@]}" "$@" --format json >"$out.out" 2>"$out.err" || rc=$?
  return "$rc"
}

explain() {
  local out="$1"
  echo "    stdout: $(head -c 400 "$out.out" 2>/dev/null)"
  echo "    stderr: $(tail -c 600 "$out.err" 2>/dev/null | tr '\n' ' ')"
}

# run_suite LABEL TARGET...: the checks common to both transports.
run_suite() {
  local label="$1"
  shift
  local target=("$@")
  local out="$WORK_DIR/$label" rc names

  rc=0; inspect "$out-tools" "${target[@]}" --method tools/list || rc=$?
  if ((rc != 0)); then
    fail "$label tools/list" "inspector exited $rc"; explain "$out-tools"
  elif names="$("${JSONCHECK[@]}" tools "$out-tools.out" "${EXPECTED_TOOLS[@]}" 2>"$out-tools.why")"; then
    pass "$label tools/list ($names)"
  else
    fail "$label tools/list" "$(cat "$out-tools.why")"
  fi

  local bad tool args field msg
  if [[ -s "$out-tools.out" ]] && bad="$("${JSONCHECK[@]}" bad-call "$out-tools.out" 2>"$out-bad.why")"; then
    IFS=$'\t' read -r tool args field <<<"$bad"
    rc=0; inspect "$out-badcall" "${target[@]}" --method tools/call --tool-name "$tool" \
      --tool-args-json "$args" || rc=$?
    if ((rc == TOOL_ERROR_EXIT)) &&
       msg="$("${JSONCHECK[@]}" is-error "$out-badcall.out" "$field" 2>"$out-badcall.why")"; then
      pass "$label tools/call $tool with bad arguments $args -> exit $TOOL_ERROR_EXIT, isError: $msg"
    elif ((rc == TOOL_ERROR_EXIT)); then
      fail "$label tools/call $tool with bad arguments $args" \
        "exit $TOOL_ERROR_EXIT but not an isError result naming '$field': $(cat "$out-badcall.why")"
    else
      fail "$label tools/call $tool with bad arguments $args" \
        "inspector exited $rc, expected $TOOL_ERROR_EXIT (isError result)"
      explain "$out-badcall"
    fi
  else
    fail "$label tools/call with bad arguments" "no tool to call: $(cat "$out-bad.why" 2>/dev/null)"
  fi

  local method key n
  for method in resources/list prompts/list resources/templates/list; do
    key="${method%%/list}"
    [[ "$key" == resources/templates ]] && key=resourceTemplates
    rc=0; inspect "$out-$key" "${target[@]}" --method "$method" || rc=$?
    if ((rc != 0)); then
      fail "$label $method" "inspector exited $rc"; explain "$out-$key"
    elif n="$("${JSONCHECK[@]}" list "$out-$key.out" "$key" 2>"$out-$key.why")"; then
      pass "$label $method ($n entries)"
    else
      fail "$label $method" "$(cat "$out-$key.why")"
    fi
  done
}

echo "== stdio"
run_suite stdio "${STDIO_ENV[@]}" "$BIN"

echo
echo "== stdio with --conformance-fixtures"
fx="$WORK_DIR/fixtures"
rc=0; inspect "$fx-ok" "${STDIO_ENV[@]}" "$BIN" --conformance-fixtures --method tools/call \
  --tool-name test_simple_text || rc=$?
if ((rc == 0)) && "${JSONCHECK[@]}" text "$fx-ok.out" "" >/dev/null 2>"$fx-ok.why"; then
  pass "stdio tools/call test_simple_text -> exit 0 with text content"
else
  fail "stdio tools/call test_simple_text" "inspector exited $rc $(cat "$fx-ok.why" 2>/dev/null)"
  explain "$fx-ok"
fi
rc=0; inspect "$fx-err" "${STDIO_ENV[@]}" "$BIN" --conformance-fixtures --method tools/call \
  --tool-name test_error_handling || rc=$?
if ((rc == TOOL_ERROR_EXIT)) && "${JSONCHECK[@]}" is-error "$fx-err.out" >/dev/null 2>"$fx-err.why"; then
  pass "stdio tools/call test_error_handling -> exit $TOOL_ERROR_EXIT, isError result"
elif ((rc == TOOL_ERROR_EXIT)); then
  fail "stdio tools/call test_error_handling" "exit $TOOL_ERROR_EXIT but no isError result: $(cat "$fx-err.why")"
  explain "$fx-err"
else
  fail "stdio tools/call test_error_handling" "inspector exited $rc, expected $TOOL_ERROR_EXIT"
  explain "$fx-err"
fi

echo
echo "== Streamable HTTP"
port=""
if start_http_server port; then
  run_suite http --transport http "http://127.0.0.1:$port/mcp"
  if ! kill -0 "${SERVER_PIDS[$port]}" 2>/dev/null; then
    fail "http server alive after the Inspector runs" "server process exited"
    show_server_logs
  fi
  stop_server "$port"
else
  fail "start HTTP server" "see messages above"
fi

finish
