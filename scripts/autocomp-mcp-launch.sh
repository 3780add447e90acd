#!/usr/bin/env bash
# Starts the autocomp-mcp server for an MCP client (the Claude Code plugin's .mcp.json runs this).
# Uses $AUTOCOMP_MCP_BIN when set, else <repo>/build/autocomp-mcp; builds it first when it is missing
# (Debian packages: scripts/install-deps.sh).
# stdout belongs to the MCP protocol: everything this script prints goes to stderr.
# Extra arguments are passed to the server (e.g. --backend, --llm, --db).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${AUTOCOMP_MCP_BIN:-$root/build/autocomp-mcp}

built() {  # a real server binary (answers --version with "autocomp-mcp X.Y.Z"), not a placeholder
  [[ -x "$bin" ]] || return 1
  local version
  version=$("$bin" --version </dev/null 2>/dev/null) || return 1
  [[ $version =~ ^autocomp-mcp\ [0-9] ]]
}

if ! built; then
  if [[ -n "${AUTOCOMP_MCP_BIN:-}" ]]; then
    echo "autocomp-mcp-launch: AUTOCOMP_MCP_BIN=$bin is not a working autocomp-mcp binary" >&2
    exit 1
  fi
  build_dir=$(dirname "$bin")
  echo "autocomp-mcp-launch: $bin missing; building it into $build_dir (takes minutes)" >&2
  if [[ ! -f $build_dir/build.ninja ]]; then
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo </dev/null 1>&2
  fi
  cmake --build "$build_dir" --target autocomp-mcp -j "$(nproc)" </dev/null 1>&2
  if ! built; then
    echo "autocomp-mcp-launch: build finished but $bin does not run; run scripts/build.sh by hand" >&2
    exit 1
  fi
fi
exec "$bin" "$@"
