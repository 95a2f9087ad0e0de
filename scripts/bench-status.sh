#!/usr/bin/env bash
# Whole-process benchmark of `airlock status` (and `status --json`, `diff`) over 50,000 staged
# files, with hyperfine. The files are made by one sandboxed command, so they are staged exactly
# as an agent's writes are (harvested from the sandbox's upper layer). Usage:
#   scripts/bench-status.sh [path/to/airlock] [N]   (defaults: target/release/airlock, 50000)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/airlock}")
n=${2:-50000}
[ -x "$bin" ] || cargo build --release -p airlock
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ws=$tmp/ws
mkdir -p "$ws" "$tmp/run"
export AIRLOCK_RUN_DIR=$tmp/run XDG_CONFIG_HOME=$tmp/config
echo "# sample" > "$ws/README.md"
t0=$(date +%s.%N)
# shellcheck disable=SC2046
"$bin" --workspace "$ws" --mode build exec -- mkdir -p $(seq -f 'gen/d%g' 0 99) 2>/dev/null
"$bin" --workspace "$ws" --mode build exec -- awk -v n="$n" 'BEGIN {
  for (i = 0; i < n; i++) { f = "gen/d" (i % 100) "/f" i ".txt"; print i > f; close(f) } }' 2>/dev/null
t1=$(date +%s.%N)
staged=$("$bin" --workspace "$ws" status | wc -l)
echo "staged $staged entries ($n files and their directories) in $(echo "$t1 - $t0" | bc) s"
[ "$staged" -ge "$n" ] || { echo "expected at least $n staged entries" >&2; exit 1; }
hyperfine --warmup 1 --runs "${RUNS:-10}" --export-json "${BENCH_JSON:-/dev/null}" \
  "$bin --workspace $ws status > /dev/null" \
  "$bin --workspace $ws --json status > /dev/null" \
  "$bin --workspace $ws diff > /dev/null"
