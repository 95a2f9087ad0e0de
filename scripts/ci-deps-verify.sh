#!/usr/bin/env bash
# Installs the real test runners the verify fixtures use: vitest and jest (pinned in
# crates/verify/fixtures/node_deps/package-lock.json), pytest, and Go (Debian's golang-go).
# Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/.."

deps=crates/verify/fixtures/node_deps
if [ ! -x "$deps/node_modules/.bin/vitest" ] || [ ! -x "$deps/node_modules/.bin/jest" ] \
   || [ "$deps/package-lock.json" -nt "$deps/node_modules/.package-lock.json" ]; then
  (cd "$deps" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

if ! python3 -c 'import pytest' >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check pytest >/dev/null 2>&1 \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pytest
fi
if ! command -v go >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q golang-go >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q golang-go >/dev/null; }
fi
echo "verify fixture deps: vitest $("$deps/node_modules/.bin/vitest" --version 2>/dev/null | head -1), jest $("$deps/node_modules/.bin/jest" --version), $(python3 -m pytest --version 2>&1 | head -1), $(go version)"
