#!/usr/bin/env bash
# Starts the autocomp-mcp server for an MCP client (the Claude Code plugin's .mcp.json runs this).
# Uses $AUTOCOMP_MCP_BIN when set, else $AUTOCOMP_BUILD_DIR/autocomp-mcp (default <repo>/build).
# When the binary is missing it starts the build in the background, detached so that it survives
# the client giving up on a slow first start (Claude Code waits about 30 s; a first build takes
# minutes), logged to <build dir>/autocomp-launch-build.log. Only one build runs at a time: a
# launch that finds one running waits for it. The launch waits up to $AUTOCOMP_LAUNCH_WAIT_S
# seconds (default 20) for the build and starts the server when it is done; otherwise it says so
# on stderr and exits 1, and the next launch (reconnect with /mcp) connects once the build is done.
# Debian packages: scripts/install-deps.sh. $AUTOCOMP_LAUNCH_BUILD_CMD replaces the build command
# (run with bash in the repository folder; it must produce the binary).
# stdout belongs to the MCP protocol: everything this script prints goes to stderr.
# Extra arguments are passed to the server (e.g. --backend, --llm, --db).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${AUTOCOMP_BUILD_DIR:-$root/build}
bin=${AUTOCOMP_MCP_BIN:-$build_dir/autocomp-mcp}
wait_s=${AUTOCOMP_LAUNCH_WAIT_S:-20}

say() { echo "autocomp-mcp-launch: $*" >&2; }

built() {  # a real server binary (answers --version with "autocomp-mcp X.Y.Z"), not a placeholder
  [[ -x "$bin" ]] || return 1
  local version
  version=$("$bin" --version </dev/null 2>/dev/null) || return 1
  [[ $version =~ ^autocomp-mcp\ [0-9] ]]
}

if built; then
  exec "$bin" "$@"
fi
if [[ -n "${AUTOCOMP_MCP_BIN:-}" ]]; then
  say "AUTOCOMP_MCP_BIN=$bin is not a working autocomp-mcp binary"
  exit 1
fi
if ! command -v flock >/dev/null 2>&1; then
  say "flock (util-linux) is missing; build the server by hand with scripts/build.sh"
  exit 1
fi

mkdir -p "$build_dir"
lock=$build_dir/autocomp-launch-build.lock
log=$build_dir/autocomp-launch-build.log
status_file=$build_dir/autocomp-launch-build.status

build_running() {  # the lock is held by a build
  ! flock -n "$lock" true 2>/dev/null
}

if ! build_running; then
  if [[ -f $status_file && $(cat "$status_file") != 0 ]]; then
    say "the previous build failed (exit $(cat "$status_file")); its log ends with:"
    tail -n 15 "$log" >&2 || true
    say "trying again"
  fi
  build_cmd=${AUTOCOMP_LAUNCH_BUILD_CMD:-}
  if [[ -z $build_cmd ]]; then
    build_cmd='if [[ ! -f "$AUTOCOMP_BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$AUTOCOMP_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$AUTOCOMP_BUILD_DIR" --target autocomp-mcp -j "$(nproc)"'
  fi
  # The child takes the lock itself, in its own session, with no tie to the client's pipes. It
  # waits for the lock rather than giving up (a launch probing the lock holds it for an instant),
  # and does nothing when another launch's build finished meanwhile.
  rm -f "$status_file"
  (
    cd "$root"
    export AUTOCOMP_BUILD_DIR=$build_dir AUTOCOMP_LAUNCH_STEP=$build_cmd \
      AUTOCOMP_LAUNCH_STATUS=$status_file AUTOCOMP_LAUNCH_BIN=$bin
    # shellcheck disable=SC2016  # expanded by the build's own shell
    setsid flock "$lock" bash -c 'if [[ -x $AUTOCOMP_LAUNCH_BIN ]] &&
  "$AUTOCOMP_LAUNCH_BIN" --version </dev/null 2>/dev/null | grep -q "^autocomp-mcp [0-9]"; then
  exit 0
fi
echo "build started $(date -u +%FT%TZ)"
bash -c "$AUTOCOMP_LAUNCH_STEP" </dev/null
code=$?
echo "$code" >"$AUTOCOMP_LAUNCH_STATUS"
echo "build ended $(date -u +%FT%TZ) with exit $code"' </dev/null >>"$log" 2>&1 &
  )
  say "$bin is missing: building it in the background (first build takes several minutes; log: $log)"
  # Give the child a moment to take the lock so that a launch right after this one waits for it.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    build_running && break
    [[ -f $status_file ]] && break
    sleep 0.1
  done
else
  say "a build of $bin is already running (log: $log); waiting for it"
fi

deadline=$((SECONDS + wait_s))
while build_running && ((SECONDS < deadline)); do
  sleep 1
done
if built; then
  say "build done; starting the server"
  exec "$bin" "$@"
fi
if build_running; then
  say "still building after ${wait_s}s; the build goes on in the background. Reconnect when it is" \
    "done (Claude Code: /mcp, then reconnect autocomp); follow it with: tail -f $log"
else
  say "the build ended without a working $bin; see $log (or run scripts/build.sh by hand)"
fi
exit 1
