#!/usr/bin/env bash
# Two airlock builds side by side on the same machine: warm and cold `exec -- true` (with bwrap
# beside them) and `status`, each over its own 10,000-file workspace. Usage:
#   scripts/bench-ab.sh BEFORE_BIN AFTER_BIN   (RUNS=60 by default; results under $BENCH_DIR)
set -euo pipefail
B=${1:?before binary}; A=${2:?after binary}
W=${BENCH_DIR:-/tmp/airlock-ab}; rm -rf $W; mkdir -p $W
for x in before after; do
  mkdir -p $W/$x; python3 - $W/$x <<'PY'
import os,sys
d=sys.argv[1]
for i in range(10000):
    sub=os.path.join(d,f"d{i//100:03d}"); os.makedirs(sub,exist_ok=True)
    open(os.path.join(sub,f"f{i%100:02d}.txt"),"w").write("x"*64)
PY
  (cd $W/$x && git init -q . )
done
export XDG_CONFIG_HOME=$W/cfg
hyperfine -N --warmup 5 --runs ${RUNS:-60} --export-json $W/warm.json \
  "$B --workspace $W/before --mode build exec -- true" \
  "$A --workspace $W/after --mode build exec -- true" \
  "bwrap --ro-bind / / --unshare-all --die-with-parent true" 2>&1 | grep -E 'Time|±|faster|Benchmark' 
AIRLOCK_SANDBOX_HOST=off hyperfine -N --warmup 3 --runs ${RUNS:-60} --export-json $W/cold.json \
  "$B --workspace $W/before --mode build exec -- true" \
  "$A --workspace $W/after --mode build exec -- true" 2>&1 | grep -E 'Time|±|faster|Benchmark'
hyperfine -N --warmup 3 --runs ${RUNS:-60} --export-json $W/status.json \
  "$B --workspace $W/before --mode build status" \
  "$A --workspace $W/after --mode build status" 2>&1 | grep -E 'Time|±|faster|Benchmark'
W=$W python3 - <<'PY'
import json, os
W=os.environ["W"]
for n in ["warm","cold","status"]:
    r=json.load(open(f"{W}/{n}.json"))["results"]
    med=[x["median"]*1000 for x in r]
    print(n, " / ".join(f"{m:.2f} ms" for m in med), f"after/before = {med[1]/med[0]:.3f}", (f"before/bwrap={med[0]/med[2]:.2f} after/bwrap={med[1]/med[2]:.2f}" if len(med)>2 else ""))
PY
