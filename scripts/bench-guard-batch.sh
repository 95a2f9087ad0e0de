#!/usr/bin/env bash
# Whole-process benchmark of `airlock guard --batch` on 10,000 commands (the shared corpus and a
# set of typical developer commands, repeated), with hyperfine. Usage:
#   scripts/bench-guard-batch.sh [path/to/airlock]   (default: target/release/airlock)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/airlock}
[ -x "$bin" ] || cargo build --release -p airlock
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
input=$(mktemp)
trap 'rm -f "$input"' EXIT
python3 - "$input" <<'PY'
import json, sys
cmds = [json.loads(l)["cmd"] for l in open("crates/policy/tests/data/guard.jsonl") if l.strip()]
extra = ["cargo build --release", "git status --short", "npm test -- --watch=false",
         "for f in src/*.rs; do wc -l \"$f\"; done", "find . -name '*.rs' | xargs grep -n TODO",
         "python3 -m pytest -q tests/", "ls -la | sort -k5 -n | tail", "make -j2 && ./run.sh"]
pool = cmds + extra
with open(sys.argv[1], "w") as f:
    for i in range(10000):
        f.write(json.dumps(pool[i % len(pool)]) + "\n")
PY
echo "10,000 commands: $(wc -c < "$input") bytes of input"
# Exit code 3 (some commands denied) is the expected result: -i keeps hyperfine going.
hyperfine --warmup 2 --runs 10 -i --export-json "${BENCH_JSON:-/dev/null}" \
  "$bin guard --batch < $input > /dev/null"
