#!/usr/bin/env bash
# The git read tools beside the plain git CLI on one large repository: `git_status` against
# `git status --porcelain=v2 --branch`, and `git_log` (50 commits) against `git log -n 50`, each
# the median of RUNS runs of a whole process (airlock's includes its start-up).
#
#   scripts/bench-git.sh [AIRLOCK_BINARY]     (default: target/release/airlock, else debug)
#
# Environment: BENCH_DIR (default /tmp/git-bench; the repository is built once and kept),
# COMMITS (default 100000), FILES (default 50000), RUNS (default 7).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts="$PWD/scripts"
bin="${1:-}"
if [[ -z "$bin" ]]; then
    if [[ -x target/release/airlock ]]; then bin=target/release/airlock; else bin=target/debug/airlock; fi
fi
bin="$(realpath "$bin")"
dir="${BENCH_DIR:-/tmp/git-bench}"
commits="${COMMITS:-100000}"
files="${FILES:-50000}"
runs="${RUNS:-7}"
repo="$dir/repo-$commits-$files"
export GIT_CONFIG_NOSYSTEM=1 HOME="$dir/home"
mkdir -p "$HOME"

if [[ ! -d "$repo/.git" ]]; then
    echo "building $repo: $commits commits, $files files (git fast-import)" >&2
    rm -rf "$repo"
    git init -q -b main "$repo"
    python3 - "$commits" "$files" <<'EOF' | git -C "$repo" fast-import --quiet
import sys
commits, files = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
def w(s):
    out.write(s.encode())
def data(b):
    w(f"data {len(b)}\n"); out.write(b); w("\n")
def path(i):
    return f"src/d{i % 100:02d}/e{(i // 100) % 50:02d}/f{i}.txt"
t = 1_600_000_000
for c in range(commits):
    w(f"commit refs/heads/main\nmark :{c + 1}\n")
    w(f"author Bench <bench@example.com> {t + c} +0000\n")
    w(f"committer Bench <bench@example.com> {t + c} +0000\n")
    data(f"commit {c}\n".encode())
    if c > 0:
        w(f"from :{c}\n")
    if c == 0:
        for i in range(files):
            w(f"M 100644 inline {path(i)}\n"); data(f"file {i}\n".encode())
    else:
        i = (c * 7919) % files
        w(f"M 100644 inline {path(i)}\n"); data(f"file {i} at {c}\n".encode())
    w("\n")
EOF
    git -C "$repo" reset -q --hard main
    # One modified and one untracked file, so status has something to say.
    echo changed >> "$repo/src/d00/e00/f0.txt"
    echo new > "$repo/untracked.txt"
    git -C "$repo" status >/dev/null
fi

median_ms() {
    # Run "$@" $runs times; print the median wall time in milliseconds (0.1 ms resolution).
    local times=()
    for _ in $(seq "$runs"); do
        local s e
        s=$(date +%s%N)
        "$@" >/dev/null
        e=$(date +%s%N)
        times+=($(( (e - s) / 1000 )))
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p" | awk '{printf "%.1f", $1 / 1000}'
}

median_call_ms() {
    # The in-process time of one tool call (from the kernel being open to the result), as a
    # long-lived MCP server pays it: AIRLOCK_TIMINGS marks "journal recovery" and "done".
    local times=()
    for _ in $(seq "$runs"); do
        times+=($(AIRLOCK_TIMINGS=1 "$@" 2>&1 >/dev/null | awk '
            /airlock-timing/ && /journal recovery/ { s = $2 }
            /airlock-timing/ && / done/ { e = $2 }
            END { printf "%.1f", (e - s) }'))
    done
    printf '%s\n' "${times[@]}" | sort -g | sed -n "$(( (runs + 1) / 2 ))p"
}

cd "$repo"
# Warm the caches once for each side.
git status --porcelain=v2 --branch >/dev/null
"$bin" --workspace "$repo" --json call git_status '{}' >/dev/null

gs=$(median_ms git -c core.fsmonitor= status --porcelain=v2 --branch --untracked-files=normal)
as=$(median_ms "$bin" --workspace "$repo" --json call git_status '{"limit": 100000}')
gl=$(median_ms git log -n 50)
al=$(median_ms "$bin" --workspace "$repo" --json call git_log '{"max_count": 50}')

cs=$(median_call_ms "$bin" --workspace "$repo" --json call git_status '{"limit": 100000}')
cl=$(median_call_ms "$bin" --workspace "$repo" --json call git_log '{"max_count": 50}')

ratio() { python3 -c "print(f'{$1 / max($2, 0.1):.2f}')"; }
echo "repository: $commits commits, $files files ($repo)"
echo "binary: $bin"
echo "whole process each (airlock: start-up, kernel open, the call); in-process: the call alone"
printf '%-12s %10s %12s %7s %16s %7s\n' "" "git (ms)" "airlock (ms)" "ratio" "in-process (ms)" "ratio"
printf '%-12s %10s %12s %7s %16s %7s\n' "status" "$gs" "$as" "$(ratio "$as" "$gs")" "$cs" "$(ratio "$cs" "$gs")"
printf '%-12s %10s %12s %7s %16s %7s\n' "log -n 50" "$gl" "$al" "$(ratio "$al" "$gl")" "$cl" "$(ratio "$cl" "$gl")"

if python3 -c 'import mcp' 2>/dev/null; then
    echo "over MCP (official SDK client, a running airlock mcp), beside the git CLI in the same script:"
    python3 "$scripts/bench-git-mcp.py" "$bin" "$repo" 25
fi
