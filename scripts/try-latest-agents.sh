#!/usr/bin/env bash
# Run the real-agent tests (setup, docs, end to end) against the newest releases of Claude Code,
# Codex CLI and Gemini CLI instead of the versions pinned in scripts/ci-deps-agents.sh, in a
# cache directory of their own. Run it weekly: a failure means a client changed how it reads
# its configuration or calls tools, and `airlock setup` (or the pins) needs to follow.
set -euo pipefail
cd "$(dirname "$0")/.."
export AIRLOCK_AGENTS_DIR="${AIRLOCK_AGENTS_LATEST_DIR:-${HOME}/.cache/airlock-agents-latest}"
export AGENTS_CLAUDE_VERSION=latest AGENTS_CODEX_VERSION=latest AGENTS_GEMINI_VERSION=latest
export AGENTS_NODE_VERSION="${AGENTS_NODE_VERSION:-22}"
# "latest" moves: always reinstall.
rm -f "$AIRLOCK_AGENTS_DIR/.installed"
bash scripts/ci-deps-agents.sh
for bin in claude codex gemini; do
  printf '%s %s\n' "$bin" "$("$AIRLOCK_AGENTS_DIR/node_modules/.bin/$bin" --version 2>/dev/null | head -1)"
done
cargo test -p airlock --test agents_setup --test agents_e2e --test agents_docs "$@"
