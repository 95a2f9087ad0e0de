#!/usr/bin/env bash
# Verify overhead: `verify` (fresh sandbox + reporter + parse + sanitise) against running the same
# test command directly, on small fixture projects. Uses hyperfine when present.
#   bash scripts/bench-verify.sh            # node, pytest, cargo
#   RUNS=20 bash scripts/bench-verify.sh node
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${RUNS:-10}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build -q --release -p airlock-verify --example verify
verify="$CARGO_TARGET_DIR/release/examples/verify"
fixtures="$root/crates/verify/fixtures"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench() { # name, workspace, direct command
  local name=$1 ws=$2 direct=$3
  echo "== $name"
  if command -v hyperfine >/dev/null; then
    hyperfine -N --warmup 2 --runs "$runs" --export-markdown "$tmp/$name.md" \
      --prepare "rm -rf $ws/target $ws/.airlock-verify" \
      -n direct "bash -c 'cd $ws && $direct >/dev/null 2>&1 || true'" \
      -n verify "bash -c '$verify $ws >/dev/null 2>&1 || true'"
    cat "$tmp/$name.md"
  else
    for label in direct verify; do
      local start end
      start=$(date +%s%N)
      for _ in $(seq "$runs"); do
        rm -rf "$ws/target" "$ws/.airlock-verify"
        if [ $label = direct ]; then (cd "$ws" && eval "$direct" >/dev/null 2>&1 || true)
        else "$verify" "$ws" >/dev/null 2>&1 || true; fi
      done
      end=$(date +%s%N)
      echo "$label: $(( (end - start) / runs / 1000000 )) ms per run"
    done
  fi
}

sel=("$@")
has() { [ ${#sel[@]} -eq 0 ] && return 0; for s in "${sel[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

if has node; then
  cp -a "$fixtures/node/pass" "$tmp/node"
  bench node "$tmp/node" "node --test --test-reporter=junit --test-reporter-destination=.airlock-verify/node.xml --test-reporter=spec --test-reporter-destination=stdout"
fi
if has pytest; then
  cp -a "$fixtures/pytest/pass" "$tmp/pytest"
  bench pytest "$tmp/pytest" "PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider --junitxml=.airlock-verify/pytest.xml"
fi
if has cargo; then
  cp -a "$fixtures/cargo/pass" "$tmp/cargo"
  bench cargo "$tmp/cargo" "env -u CARGO_TARGET_DIR cargo test --offline --no-fail-fast --message-format=json-diagnostic-short"
fi
