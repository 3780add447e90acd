#!/usr/bin/env bash
# Runs the MCP latency/throughput benchmark (mcp_latency.mjs) for autocomp-mcp and the TypeScript
# SDK reference server (ts_sdk_server.mjs) under the project-local Node 22. Prints figures only.
# usage: run_mcp_bench.sh [path/to/autocomp-mcp] [extra mcp_latency.mjs options...]
#   e.g. run_mcp_bench.sh build/autocomp-mcp --iterations 5000 --json /tmp/bench.json
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:-$repo/build/autocomp-mcp}"
shift || true
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
if [[ ! -x "$bin" ]]; then
  echo "run_mcp_bench.sh: server binary not found: $bin" >&2
  exit 2
fi
"$repo/tests/npm/install.sh"
exec timeout 900 "$repo/tests/npm/node_modules/.bin/node" "$here/mcp_latency.mjs" --bin "$bin" "$@"
