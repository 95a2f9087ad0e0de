#!/usr/bin/env bash
# Whole-process benchmark of airlock's sandbox.
#
#   scripts/bench-sandbox.sh [AIRLOCK_BIN]
#
# 1. Start-up: `AIRLOCK_BIN exec -- true` (or, without AIRLOCK_BIN, the sandbox crate's example
#    runner, which does the same: probe, namespaces, minimal root, overlay, Landlock, seccomp, exec,
#    harvest) against `bwrap --ro-bind / / --unshare-all --die-with-parent true` and bare `true`.
# 2. Workspace size: a sandboxed `true` over synthetic 10k- and 100k-file workspaces, against
#    copying the workspace (`cp -r` into a temporary directory, run, `cp -r` back out).
#
# Prints median times and ratios (markdown) on stdout; raw hyperfine JSON goes to $OUT_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
AIRLOCK_BIN=${1:-}
BENCH_DIR=${BENCH_DIR:-/tmp/airlock-bench}
OUT_DIR=${OUT_DIR:-$BENCH_DIR/results}
RUNS=${RUNS:-40}
mkdir -p "$BENCH_DIR" "$OUT_DIR"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need hyperfine || ! need bwrap; then
    apt-get install -y hyperfine bubblewrap >/dev/null
fi

if [ -z "$AIRLOCK_BIN" ]; then
    (cd "$ROOT" && cargo build --release -q -p airlock-sandbox --example run)
    TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
    RUNNER="$TARGET/release/examples/run --quiet"
    sandboxed() { echo "$RUNNER $1 -- true"; }
    LABEL="sandbox (examples/run)"
else
    # --workspace instead of cd: nothing but airlock itself is timed.
    sandboxed() { echo "$AIRLOCK_BIN --workspace $1 --mode build exec -- true"; }
    LABEL="airlock exec"
fi

make_ws() { # DIR FILES: FILES files, 100 per directory, 64 bytes each
    local dir=$1 files=$2
    [ -f "$dir/.done" ] && return
    rm -rf "$dir" && mkdir -p "$dir"
    python3 - "$dir" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i // 100:05d}")
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i % 100:03d}.txt"), "w") as f:
        f.write(f"{i:063d}\n")
PY
    touch "$dir/.done"
}

SMALL=$BENCH_DIR/ws-small; mkdir -p "$SMALL"; echo hi > "$SMALL/a.txt"
make_ws "$BENCH_DIR/ws10k" 10000
make_ws "$BENCH_DIR/ws100k" 100000

copy_cmd() { # copy in, run, copy back out, clean up
    echo "bash -c 'd=\$(mktemp -d) && cp -r $1 \$d/ws && (cd \$d/ws && true) && cp -r \$d/ws \$d/out && rm -rf \$d'"
}

# Start-up and workspace size. On a shared machine the load drifts within a run, so the commands
# are interleaved: ROUNDS rounds, each running every command RUNS times (hyperfine -N, after a
# warm-up), and the medians are taken over all rounds. "airlock exec" is the default path (the
# session's warm sandbox host, started by the warm-up); "cold" sets AIRLOCK_SANDBOX_HOST=off, so
# every run creates its namespaces and root from nothing, as bwrap does (its row also pays for
# starting `env`).
ROUNDS=${ROUNDS:-5}
for r in $(seq "$ROUNDS"); do
    hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$OUT_DIR/startup-$r.json" \
        -n "$LABEL" "$(sandboxed "$SMALL")" \
        -n "$LABEL, cold (no warm host)" "env AIRLOCK_SANDBOX_HOST=off $(sandboxed "$SMALL")" \
        -n "bwrap" "bwrap --ro-bind / / --unshare-all --die-with-parent true" \
        -n "true" "true" >&2
    hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$OUT_DIR/size-$r.json" \
        -n "sandbox 10k" "$(sandboxed "$BENCH_DIR/ws10k")" \
        -n "sandbox 100k" "$(sandboxed "$BENCH_DIR/ws100k")" >&2
done
python3 - "$OUT_DIR" "$ROUNDS" <<'PY'
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for name in ("startup", "size"):
    merged = {}
    for r in range(1, rounds + 1):
        for res in json.load(open(os.path.join(out, f"{name}-{r}.json")))["results"]:
            m = merged.setdefault(res["command"], dict(res, times=[]))
            m["times"].extend(res["times"])
    results = []
    for m in merged.values():
        t = sorted(m["times"])
        m["median"] = t[len(t) // 2]
        results.append(m)
    json.dump({"results": results}, open(os.path.join(out, name + ".json"), "w"))
PY

# Copying is slow (seconds per run on a disk with online discard): few runs; SKIP_COPY=1
# reuses the previous copy results.
if [ -z "${SKIP_COPY:-}" ] || [ ! -f "$OUT_DIR/copy.json" ]; then
    hyperfine -N --runs "${COPY_RUNS:-3}" --export-json "$OUT_DIR/copy.json" \
        -n "copy 10k" "$(copy_cmd "$BENCH_DIR/ws10k")" \
        -n "copy 100k" "$(copy_cmd "$BENCH_DIR/ws100k")" >&2
fi

python3 - "$OUT_DIR" <<'PY'
import json, sys, os
out = sys.argv[1]
med = {}
for f in ("startup", "size", "copy"):
    for r in json.load(open(os.path.join(out, f + ".json")))["results"]:
        med[r["command"]] = r["median"] * 1000
names = list(med)
print("| command | median (ms) |")
print("|---|---|")
for n in names:
    print(f"| {n} | {med[n]:.1f} |")
sb = names[0]
print()
print(f"- {sb} / bwrap: {med[sb] / med['bwrap']:.2f}x (target <= 1.5x)")
cold = names[1]
print(f"- {cold} / bwrap: {med[cold] / med['bwrap']:.2f}x")
print(f"- sandbox 100k / sandbox 10k: {med['sandbox 100k'] / med['sandbox 10k']:.2f}x (target <= 1.2x)")
print(f"- copy 10k / sandbox 10k: {med['copy 10k'] / med['sandbox 10k']:.1f}x")
print(f"- copy 100k / sandbox 100k: {med['copy 100k'] / med['sandbox 100k']:.1f}x")
PY
