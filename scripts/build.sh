#!/usr/bin/env bash
# Configures (once) and builds the project into build/ (or $AUTOCOMP_BUILD_DIR). Incremental.
# With target names (e.g. `scripts/build.sh autocomp-mcp`) it builds only those and what they
# need; without, everything (the binary, every test and benchmark).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${AUTOCOMP_BUILD_DIR:-$root/build}
jobs=${AUTOCOMP_JOBS:-$(nproc)}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  # Several work trees of the same sources share compiled objects.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f $build_dir/build.ninja ]]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}"
fi
targets=()
for target in "$@"; do
  targets+=(--target "$target")
done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
