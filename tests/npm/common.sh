# Shared helpers for the tests/integration/*.sh suites that drive autocomp-mcp with npm MCP
# clients. Sourced (never run) by those scripts, after `set -euo pipefail`.
#
# Provides:
#   BIN          the server binary: the script's first argument, else build/autocomp-mcp
#   REPO_ROOT, NPM_DIR, NODE22 (project-local Node 22), WORK_DIR (per-run temp dir, removed on exit)
#   npm_clients_install        installs the pinned npm packages (fast when already installed)
#   start_http_server VAR ARGS  starts `BIN --http 127.0.0.1:0 --port-file F ARGS`; VAR gets the port
#   stop_server PORT            stops the server started on PORT
#   pass NAME / fail NAME WHY   record one check;  finish  prints "N passed, N failed" and exits
# Every child started through these helpers is killed when the script exits, however it exits.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NPM_DIR="$REPO_ROOT/tests/npm"
NODE22="$NPM_DIR/node_modules/.bin/node"
NPM_BIN="$NPM_DIR/node_modules/.bin"

BIN="${1:-$REPO_ROOT/build/autocomp-mcp}"
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac

WORK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/autocomp-npm.XXXXXX")"
# Servers started by the suites keep their data (the SQLite store) in the run's temp dir.
export XDG_DATA_HOME="$WORK_DIR/xdg-data"
mkdir -p "$XDG_DATA_HOME"
CHECKS_PASSED=0
CHECKS_FAILED=0
FAILED_NAMES=()
declare -A SERVER_PIDS=()   # port -> pid
CHILD_PIDS=()

pass() {
  CHECKS_PASSED=$((CHECKS_PASSED + 1))
  printf 'PASS  %s\n' "$1"
}

fail() {
  CHECKS_FAILED=$((CHECKS_FAILED + 1))
  FAILED_NAMES+=("$1")
  printf 'FAIL  %s: %s\n' "$1" "${2:-}"
}

# Prints the closing summary line and exits non-zero when any check failed (or none ran).
finish() {
  if ((CHECKS_FAILED > 0)); then
    printf '\nFailed checks:\n'
    printf '  %s\n' "${FAILED_NAMES[@]}"
  fi
  printf '\n%d passed, %d failed\n' "$CHECKS_PASSED" "$CHECKS_FAILED"
  if ((CHECKS_FAILED > 0 || CHECKS_PASSED == 0)); then
    exit 1
  fi
  exit 0
}

# Sends TERM to one process, then KILL if it is still there after two seconds.
kill_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 20); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup_children() {
  local pid
  for pid in "${SERVER_PIDS[@]}" "${CHILD_PIDS[@]}"; do
    [[ -n "$pid" ]] && kill_pid "$pid"
  done
  rm -rf "$WORK_DIR"
}
trap cleanup_children EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

require_binary() {
  if [[ ! -x "$BIN" ]]; then
    fail "server binary" "not found or not executable: $BIN"
    finish
  fi
}

npm_clients_install() {
  if ! timeout 900 "$NPM_DIR/install.sh"; then
    fail "npm clients install" "tests/npm/install.sh failed"
    finish
  fi
}

# start_http_server VAR [extra server args...]
# Starts the server on a free loopback port and waits (at most 20 s) for it to write its port.
# The server's stderr goes to $WORK_DIR/server-<n>.log.
start_http_server() {
  local -n port_out="$1"
  shift
  local n=$(( ${#SERVER_PIDS[@]} + 1 ))
  local port_file="$WORK_DIR/port-$n-$RANDOM"
  local log="$WORK_DIR/server-$n.log"
  "$BIN" --http 127.0.0.1:0 --port-file "$port_file" "$@" </dev/null >"$log.stdout" 2>"$log" &
  local pid=$!
  local i
  for i in $(seq 200); do
    if [[ -s "$port_file" ]] && grep -Eq '^[0-9]+$' "$port_file"; then
      port_out="$(cat "$port_file")"
      SERVER_PIDS["$port_out"]=$pid
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "server exited before listening; its stderr:" >&2
      tail -n 20 "$log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "server did not write its port file within 20 s" >&2
  kill_pid "$pid"
  return 1
}

stop_server() {
  local port="$1"
  local pid="${SERVER_PIDS[$port]:-}"
  [[ -n "$pid" ]] && kill_pid "$pid"
  unset 'SERVER_PIDS[$port]'
}

# Prints the last lines of every server log (for failure diagnosis).
show_server_logs() {
  local f
  for f in "$WORK_DIR"/server-*.log; do
    [[ -s "$f" ]] || continue
    echo "--- last lines of $(basename "$f")"
    tail -n 15 "$f"
  done
}

# Prepares an offline Claude Code CLI in a throw-away HOME: sets CLAUDE (the pinned binary) and
# PROJECT (an empty working folder, made the current directory), clears provider credentials and
# points every proxy at a closed local port, so nothing can leave the machine.
claude_offline_sandbox() {
  CLAUDE="$NPM_BIN/claude"
  export HOME="$WORK_DIR/home"
  PROJECT="$WORK_DIR/project"
  mkdir -p "$HOME" "$PROJECT"
  unset CLAUDE_CONFIG_DIR ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN ANTHROPIC_BASE_URL CLAUDECODE
  export DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
  export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
  export HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 ALL_PROXY=http://127.0.0.1:9
  export https_proxy="$HTTPS_PROXY" http_proxy="$HTTP_PROXY" all_proxy="$ALL_PROXY"
  export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
  cd "$PROJECT"
}

# claude_cmd OUTFILE ARGS...: a bounded run of the sandboxed CLI, combined output to OUTFILE.
claude_cmd() {
  local out="$1"
  shift
  local rc=0
  timeout 120 "$CLAUDE" "$@" </dev/null >"$out" 2>&1 || rc=$?
  return "$rc"
}

# show FILE: the last lines of a command's output, indented, for failure messages.
show() { sed 's/^/    /' "$1" | tail -n 15; }
