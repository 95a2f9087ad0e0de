#!/usr/bin/env bash
# The Landlock tier beside the full tier: `airlock exec -- true` and `airlock verify` on a
# workspace of 10,000 files, median wall time of N runs each (default 5).
# Usage: scripts/bench-tier.sh [path/to/airlock] [N]   (build it first: cargo build --release -p airlock)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/airlock}")
n=${2:-5}
[ -x "$bin" ] || { echo "no airlock binary at $bin (cargo build --release -p airlock)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/airlock-bench-tier-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ws=$tmp/ws
mkdir -p "$ws" "$tmp/home"
python3 - "$ws" <<'PY'
import os, sys
ws = sys.argv[1]
for d in range(100):
    os.makedirs(f"{ws}/src/m{d}", exist_ok=True)
    for f in range(100):
        with open(f"{ws}/src/m{d}/f{f}.txt", "w") as fh:
            fh.write(f"module {d} file {f}\n" * 8)
PY
export HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home/.config
median_ms() { # command...: the median wall time of n runs, in ms
    local times=()
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(date +%s%N)
        local code=0
        "$@" >/dev/null 2>&1 || code=$?
        # verify exits 4 for `no_tests` (the check prints no test count): still a full run.
        [ "$code" = 0 ] || [ "$code" = 4 ] || { echo "failed ($code): $*" >&2; return 1; }
        t1=$(date +%s%N)
        times+=($(( (t1 - t0) / 1000000 )))
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
run() { # tier host-mode args...
    local tier=$1 host=$2; shift 2
    AIRLOCK_SANDBOX_HOST=$host "$bin" --workspace "$ws" --sandbox "$tier" --mode build "$@"
}
verify_cmd=(verify -- sh -c 'test "$(find . -type f | wc -l)" -ge 10000')
echo "workspace: $(find "$ws" -type f | wc -l) files; $n runs each; binary: $bin"
printf '%-34s %10s %10s\n' "" "full" "landlock"
printf '%-34s %8s ms %8s ms\n' "exec -- true (cold)" \
    "$(median_ms run full off exec -- true)" "$(median_ms run landlock off exec -- true)"
run full auto exec -- true >/dev/null 2>&1 || true   # leaves the warm host for the next line
printf '%-34s %8s ms %8s ms\n' "exec -- true (warm host; full only)" \
    "$(median_ms run full auto exec -- true)" "$(median_ms run landlock auto exec -- true)"
printf '%-34s %8s ms %8s ms\n' "verify (10,000 files)" \
    "$(median_ms run full off "${verify_cmd[@]}")" "$(median_ms run landlock off "${verify_cmd[@]}")"
