#!/usr/bin/env bash
# The whole test suite: checks the C++ formatting, installs what is missing, builds the binary
# and every test, installs the pinned npm test clients, then runs every ctest suite (unit,
# integration, python, npm). Extra arguments go to ctest, e.g. `scripts/test.sh -L unit`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${AUTOCOMP_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
"$root/scripts/check_format.sh"
"$root/scripts/build.sh"
if [[ -x $root/tests/npm/install.sh ]]; then
  "$root/tests/npm/install.sh"
fi
# A pyenv rehash killed mid-way (the SSH tests kill remote process groups) leaves a lock behind
# that makes every later SSH login wait 60 s; clear a stale one before the suite.
pyenv_lock=${HOME:-/root}/.pyenv/shims/.pyenv-shim
if [[ -e $pyenv_lock ]] && [[ -n $(find "$pyenv_lock" -mmin +1 2>/dev/null) ]]; then
  rm -f "$pyenv_lock"
fi
cd "$build_dir"
ctest --output-on-failure -j "${AUTOCOMP_TEST_JOBS:-2}" --timeout 1200 "$@"
