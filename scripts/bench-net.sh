#!/usr/bin/env bash
# Network egress through airlock's proxy, side by side with the same client run directly on the
# host: (1) time to a first byte per new HTTPS connection (TCP + CONNECT + TLS + one request),
# (2) throughput of one large download, (3) start-up of a granted run against an offline one.
# Needs curl, hyperfine and a reachable package registry. Usage:
#   scripts/bench-net.sh [AIRLOCK_BIN]   (default target/debug/airlock; RUNS=20, URL_SMALL,
#                                          URL_LARGE override the targets; results in $BENCH_DIR)
set -euo pipefail
BIN=${1:-target/debug/airlock}; BIN=$(realpath "$BIN")
RUNS=${RUNS:-20}
REG=$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)
REG=${REG%/}
URL_SMALL=${URL_SMALL:-$REG/left-pad}
URL_LARGE=${URL_LARGE:-$REG/typescript/-/typescript-5.4.5.tgz}
host_of() { python3 -c 'import sys,urllib.parse as u; print(u.urlsplit(sys.argv[1]).hostname)' "$1"; }
W=${BENCH_DIR:-/tmp/airlock-bench-net}; rm -rf "$W"; mkdir -p "$W/ws" "$W/cfg"
(cd "$W/ws" && git init -q .)
export XDG_CONFIG_HOME=$W/cfg
AL=("$BIN" --workspace "$W/ws" --mode build)
GRANT=(--allow-net "$(host_of "$URL_SMALL")" --allow-net "$(host_of "$URL_LARGE")")
fmt='%{time_connect} %{time_appconnect} %{time_starttransfer} %{time_total} %{size_download} %{speed_download}\n'

# One curl per line of output, so each line is a new connection.
measure() { # label, then the command prefix (empty: direct)
  local label=$1; shift
  : > "$W/$label.txt"
  for _ in $(seq "$RUNS"); do
    "$@" curl -sS -o /dev/null -w "$fmt" "$URL_SMALL" >> "$W/$label.txt"
  done
  "$@" curl -sS -o /dev/null -w "$fmt" "$URL_LARGE" > "$W/$label-large.txt"
}
measure direct
measure proxied "${AL[@]}" exec "${GRANT[@]}" --
W=$W python3 - <<'PY'
import os, statistics as st
W = os.environ["W"]
def rows(name):
    return [list(map(float, l.split())) for l in open(f"{W}/{name}.txt") if l.strip()]
print("per connection (median of %d, ms): connect / TLS done / first byte" % len(rows("direct")))
for name in ["direct", "proxied"]:
    r = rows(name)
    med = [st.median(x[i] for x in r) * 1000 for i in range(3)]
    print(f"  {name:8s} {med[0]:7.1f} {med[1]:7.1f} {med[2]:7.1f}")
d = st.median(x[2] for x in rows("direct")); p = st.median(x[2] for x in rows("proxied"))
print(f"  added by the proxy to the first byte: {(p - d) * 1000:.1f} ms")
print("large download:")
for name in ["direct", "proxied"]:
    x = rows(name + "-large")[0]
    print(f"  {name:8s} {x[4] / 1e6:7.1f} MB in {x[3]:.2f} s = {x[5] / 1e6:.1f} MB/s")
PY
if command -v hyperfine >/dev/null; then
  echo "start-up: offline and granted, each through the warm host and cold:"
  hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$W/startup.json" \
    "${AL[*]} exec -- true" \
    "${AL[*]} exec --allow-net example.com -- true" \
    "env AIRLOCK_SANDBOX_HOST=off ${AL[*]} exec -- true" \
    "env AIRLOCK_SANDBOX_HOST=off ${AL[*]} exec --allow-net example.com -- true" 2>&1 \
    | grep -E 'Time|Benchmark'
else
  echo "hyperfine not found: start-up comparison skipped"
fi
