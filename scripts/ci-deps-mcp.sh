#!/usr/bin/env bash
# Install what the MCP client tests need: the official MCP Python SDK and pytest.
# Quiet and idempotent: does nothing when the pinned versions are already importable.
set -euo pipefail

MCP_VERSION="${MCP_VERSION:-2.3.0}"
PYTHON="${PYTHON:-python3}"

have() {
  "$PYTHON" - "$MCP_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import mcp, pytest, anyio  # noqa: F401
sys.exit(0 if version("mcp") == sys.argv[1] else 1)
PY
}

if have; then
  exit 0
fi
"$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  "mcp==${MCP_VERSION}" "pytest>=8"
have || { echo "ci-deps-mcp: mcp ${MCP_VERSION} is still not importable by ${PYTHON}" >&2; exit 1; }
