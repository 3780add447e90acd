#!/usr/bin/env bash
# Installs the pinned npm MCP clients into tests/npm/node_modules with `npm ci`.
#
# Contract: idempotent. It does nothing when node_modules was installed after the last change of
# package.json / package-lock.json and the binaries the tests use are present. Only the npm registry
# is contacted. Concurrent callers (ctest -j) are serialized with a lock file.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

stamp="node_modules/.autocomp-installed"
needed_bins=(node conformance mcp-inspector claude)

up_to_date() {
  [[ -f "$stamp" && "$stamp" -nt package-lock.json && "$stamp" -nt package.json ]] || return 1
  local b
  for b in "${needed_bins[@]}"; do
    [[ -x "node_modules/.bin/$b" ]] || return 1
  done
  node_modules/.bin/node --version >/dev/null 2>&1
}

if up_to_date; then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install.sh: npm is not installed (Debian: apt-get install -y nodejs npm)" >&2
  exit 1
fi

exec 9>"${TMPDIR:-/tmp}/autocomp-mcp-npm-install.lock"
flock -w 900 9 || { echo "install.sh: timed out waiting for another install" >&2; exit 1; }

# Another caller may have finished the install while this one waited for the lock.
if up_to_date; then
  exit 0
fi

echo "install.sh: npm ci in $here" >&2
rm -f "$stamp"
npm ci --no-audit --no-fund --loglevel=error >&2
for b in "${needed_bins[@]}"; do
  if [[ ! -x "node_modules/.bin/$b" ]]; then
    echo "install.sh: node_modules/.bin/$b missing after npm ci" >&2
    exit 1
  fi
done
node_modules/.bin/node --version >/dev/null
touch "$stamp"
