#!/usr/bin/env bash
# The clients the network tests drive against the real registries: curl, npm, pip (python3 -m
# pip) and cargo, plus hyperfine for scripts/bench-net.sh and ssh for the git_push ssh test. Installs what is missing from Debian;
# idempotent and quiet. The tests need the package registries (npm, PyPI, crates.io) reachable.
set -euo pipefail
missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v npm >/dev/null 2>&1 || missing+=(npm)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
command -v hyperfine >/dev/null 2>&1 || missing+=(hyperfine)
# The git tools' test of the ssh a push runs asks ssh itself (ssh -G) what it would use.
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
command -v cargo >/dev/null 2>&1 || { echo "ci-deps-net: cargo is needed" >&2; exit 1; }
echo "net test clients: curl $(curl --version | head -1 | cut -d' ' -f2), npm $(npm --version), $(python3 -m pip --version | cut -d' ' -f1-2), $(cargo --version)"
