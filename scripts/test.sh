#!/usr/bin/env bash
# The whole test suite, on a fresh machine too: installs the real test runners the suite drives
# (vitest, jest, pytest, the MCP Python SDK), then runs every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
for deps in scripts/ci-deps-*.sh; do
  [ -f "$deps" ] && bash "$deps"
done
cargo test --workspace --locked "$@"
