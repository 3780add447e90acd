#!/usr/bin/env bash
# First launch from a plugin install: scripts/autocomp-mcp-launch.sh with no server binary starts
# the build detached and logged, says so on stderr and returns within its wait; a second launch
# meanwhile starts no second build; a later launch waits for the build and runs the server. The
# build is a stand-in (AUTOCOMP_LAUNCH_BUILD_CMD) that takes a few seconds and copies the real
# binary into place.
# usage: agent_loop_launch.sh path/to/autocomp-mcp
set -euo pipefail
real_bin=$(realpath "${1:?usage: agent_loop_launch.sh path/to/autocomp-mcp}")
launcher=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/autocomp-mcp-launch.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
pass() { echo "ok - $1"; }
fail() { echo "not ok - $1: $2"; failures=$((failures + 1)); }

export AUTOCOMP_BUILD_DIR=$work/build
unset AUTOCOMP_MCP_BIN
export AUTOCOMP_LAUNCH_BUILD_CMD="echo build >>'$work/builds'; sleep 4; cp '$real_bin' \"\$AUTOCOMP_BUILD_DIR/autocomp-mcp\""

# 1. The first launch returns within its wait while the build goes on.
start=$SECONDS
if AUTOCOMP_LAUNCH_WAIT_S=1 bash "$launcher" --version >"$work/out1" 2>"$work/err1"; then
  fail "first launch" "succeeded before any build could finish"
else
  pass "first launch exits while the build runs"
fi
((SECONDS - start <= 3)) && pass "first launch returned in $((SECONDS - start)) s" ||
  fail "first launch" "took $((SECONDS - start)) s"
grep -q "building it in the background" "$work/err1" && pass "stderr says it is building" ||
  fail "stderr" "$(cat "$work/err1")"
[[ ! -s $work/out1 ]] && pass "nothing on stdout" || fail "stdout" "$(cat "$work/out1")"

# 2. A second launch meanwhile waits for the same build instead of starting another.
AUTOCOMP_LAUNCH_WAIT_S=1 bash "$launcher" --version >/dev/null 2>"$work/err2" || true
grep -q "already running" "$work/err2" && pass "second launch finds the running build" ||
  fail "second launch" "$(cat "$work/err2")"

# 3. The next launch waits for the build and runs the server.
if AUTOCOMP_LAUNCH_WAIT_S=30 bash "$launcher" --version >"$work/out3" 2>"$work/err3" &&
  grep -q "^autocomp-mcp [0-9]" "$work/out3"; then
  pass "a later launch runs the built server"
else
  fail "later launch" "$(cat "$work/out3" "$work/err3")"
fi
[[ $(wc -l <"$work/builds") -eq 1 ]] && pass "exactly one build ran" ||
  fail "builds" "$(wc -l <"$work/builds") builds"
grep -q "build ended .* with exit 0" "$AUTOCOMP_BUILD_DIR/autocomp-launch-build.log" &&
  pass "the build is logged" || fail "log" "$(cat "$AUTOCOMP_BUILD_DIR/autocomp-launch-build.log")"

# 4. Once built, a launch runs the server at once.
start=$SECONDS
bash "$launcher" --version 2>/dev/null | grep -q "^autocomp-mcp [0-9]" && ((SECONDS - start <= 2)) &&
  pass "built: the server starts at once" || fail "built launch" "slow or no server"

exit $((failures > 0))
