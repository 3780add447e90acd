#!/usr/bin/env bash
# The main job: installs what is missing, builds, then shows the product on a seed workload in the
# built-in NKI simulator. It measures the RMSNorm kernel with declared knobs through the same tool
# calls an agent makes (verify, benchmark, profile), then runs the autonomous search on it. With no
# LLM configured the search tunes the declared knobs; with --llm (set AUTOCOMP_LLM=openai:MODEL and
# the provider's key) it also plans and rewrites the kernel. Results land in build/demo/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${AUTOCOMP_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" autocomp-mcp  # only the binary: the tests are scripts/test.sh's

bin=$build_dir/autocomp-mcp
demo=$build_dir/demo
mkdir -p "$demo"
db=${AUTOCOMP_DB:-$demo/demo.db}
cp "$root/seeds/rmsnorm/tunable.py" "$demo/rmsnorm.py"
cp "$root/seeds/rmsnorm/problem.py" "$demo/problem.py"
args=$(printf '{"kernel":"%s/rmsnorm.py","problem":"%s/problem.py"}' "$demo" "$demo")

for tool in verify_kernel benchmark_kernel profile_kernel; do
  echo "== $tool rmsnorm.py"
  "$bin" call "$tool" --db "$db" --args "$args"
done

llm=()
if [[ -n ${AUTOCOMP_LLM:-} ]]; then
  llm=(--llm "$AUTOCOMP_LLM")
fi
echo "== autocomp-mcp --autonomous (search on the simulator)"
"$bin" --autonomous --kernel "$demo/rmsnorm.py" --problem "$demo/problem.py" --db "$db" \
  --beam 2 --iterations 2 --seed 1 "${llm[@]}"
echo "== best kernel: $demo/rmsnorm.best.py; report: $demo/rmsnorm.autocomp-report/report.html"
