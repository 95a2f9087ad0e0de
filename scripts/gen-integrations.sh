#!/usr/bin/env bash
# Regenerate the per-client blocks of docs/INTEGRATIONS.md from `airlock setup CLIENT --print`
# (the agents_docs test compares them and fails when they differ).
set -euo pipefail
cd "$(dirname "$0")/.."
AIRLOCK_REGEN_DOCS=1 cargo test -p airlock --test agents_docs --quiet
