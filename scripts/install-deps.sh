#!/usr/bin/env bash
# Installs the Debian packages the project needs, only those that are missing (idempotent).
# Run as root on Debian 12. Nothing else is downloaded: npm test tools come from tests/npm's lockfile.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libssh-dev libsqlite3-dev libspdlog-dev libssl-dev
  googletest libgtest-dev libgmock-dev
  openssh-server openssh-client procps
  python3 python3-numpy libopenblas0-pthread ccache clang-format
  bubblewrap libseccomp2
  slurm-wlm munge
  chromium  # the report test renders report.html in headless chromium
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
