#!/usr/bin/env bash
# Checks that every C++ file matches the root .clang-format (no file is changed). Fails listing
# the files that differ; fix them with `clang-format -i FILE...`. scripts/test.sh runs it first.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format is not installed (apt-get install clang-format)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp')
else
  mapfile -t files < <(find . -path ./build -prune -o \( -name '*.cpp' -o -name '*.hpp' \) -print)
fi
# One clang-format process per 64 files; each violation is reported as "FILE:LINE:COL: error: ...".
mapfile -t bad < <(printf '%s\0' "${files[@]}" |
  xargs -0 -n 64 clang-format --dry-run -Werror 2>&1 >/dev/null |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*clang-format-violations.*/\1/p' | sort -u)
if ((${#bad[@]} > 0)); then
  echo "check_format: ${#bad[@]} of ${#files[@]} C++ files differ from .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix with: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} C++ files match .clang-format"
