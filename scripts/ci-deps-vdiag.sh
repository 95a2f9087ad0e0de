#!/usr/bin/env bash
# Installs the TypeScript compiler the verify diagnostics fixtures run (pinned in
# crates/verify/fixtures/ts_deps/package-lock.json). Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/.."

deps=crates/verify/fixtures/ts_deps
if [ ! -x "$deps/node_modules/.bin/tsc" ] \
   || [ "$deps/package-lock.json" -nt "$deps/node_modules/.package-lock.json" ]; then
  (cd "$deps" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
