#!/usr/bin/env bash
# The main job: installs what is missing, builds, then shows the product on a seed workload in the
# built-in NKI simulator — verify the naive RMSNorm kernel, benchmark and profile it, and do the same
# for the optimized kernel, through the same tool calls an agent makes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${AUTOCOMP_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

bin=$build_dir/autocomp-mcp
db=${AUTOCOMP_DB:-$build_dir/demo.db}
seed=$root/seeds/rmsnorm
for kernel in naive optimized; do
  args=$(printf '{"kernel":"%s/%s.py","problem":"%s/problem.py"}' "$seed" "$kernel" "$seed")
  echo "== verify_kernel $kernel"
  "$bin" call verify_kernel --db "$db" --args "$args"
  echo "== benchmark_kernel $kernel"
  "$bin" call benchmark_kernel --db "$db" --args "$args"
  echo "== profile_kernel $kernel"
  "$bin" call profile_kernel --db "$db" --args "$args"
done
