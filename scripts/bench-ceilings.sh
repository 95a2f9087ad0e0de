#!/usr/bin/env bash
# Cost and effect of the per-run resource ceilings.
#
#   scripts/bench-ceilings.sh AIRLOCK_BIN
#
# 1. Start-up cost: `airlock exec -- true` with the run's control group (the default where one
#    can be made) and with the rlimit path only (AIRLOCK_SANDBOX_CGROUP=off), warm and cold.
# 2. A fork bomb of 64 busy loops for BOMB_SECS: the host's view while it runs (runnable tasks
#    sampled every 100 ms, the 1-minute load average at the end, and how much a host-side busy
#    loop gets done compared with an idle machine), with and without the control group.
# 3. A 3 GiB memory bomb under `--memory 512M`: how it ends and the host's lowest MemAvailable.
set -euo pipefail
BIN=${1:?usage: $0 AIRLOCK_BIN}
BIN=$(realpath "$BIN")
RUNS=${RUNS:-40}
BOMB_SECS=${BOMB_SECS:-20}
need() { command -v "$1" >/dev/null 2>&1; }
need hyperfine || apt-get install -y hyperfine >/dev/null
WS=$(mktemp -d /tmp/airlock-ceil-XXXX)
trap 'rm -rf "$WS"' EXIT
mkdir -p "$WS/ws"
cd "$WS/ws"
echo hi > a.txt
printf 'i=0; while [ $i -lt 64 ]; do ( while :; do :; done ) & i=$((i+1)); done; wait\n' > bomb.sh
printf 's = b"x" * (3 << 30)\nprint("allocated", len(s))\n' > mem.py
A="$BIN --workspace $WS/ws --mode build"

echo "## exec -- true (median of $RUNS, interleaved)"
hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$WS/startup.json" \
    -n "warm, cgroup" "$A exec -- true" \
    -n "warm, rlimits only" "env AIRLOCK_SANDBOX_CGROUP=off $A exec -- true" \
    -n "cold, cgroup" "env AIRLOCK_SANDBOX_HOST=off $A exec -- true" \
    -n "cold, rlimits only" "env AIRLOCK_SANDBOX_HOST=off AIRLOCK_SANDBOX_CGROUP=off $A exec -- true" >&2
python3 - "$WS/startup.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
for k, x in r.items():
    print(f"| {k} | {x['median']*1000:.2f} ms |")
for mode in ("warm", "cold"):
    a, b = r[f"{mode}, cgroup"]["median"], r[f"{mode}, rlimits only"]["median"]
    print(f"| {mode}: cgroup / rlimits only | {a/b:.2f}x |")
PY

probe() { # SECS: iterations of a host-side busy loop in SECS seconds
    python3 -c "import time
t=time.time()+$1; n=0
while time.time()<t: n+=1
print(n)"
}
runnable() { # sample the run queue every 100 ms into $1 until $2 exists
    while [ ! -e "$2" ]; do cut -d' ' -f4 /proc/loadavg | cut -d/ -f1 >> "$1"; sleep 0.1; done
}
stats() { python3 -c "import sys,statistics as s; v=[int(x) for x in open('$1')]; print(f'median {s.median(v):.0f}, max {max(v)}')"; }

echo
echo "## fork bomb of 64 busy loops, ${BOMB_SECS}s"
IDLE=$(probe 5)
echo "host probe, idle: $IDLE iterations in 5 s"
for mode in cgroup off; do
    rm -f "$WS/done" "$WS/rq"
    runnable "$WS/rq" "$WS/done" &
    env AIRLOCK_SANDBOX_CGROUP=$mode $A --json exec --timeout "$BOMB_SECS" -- sh bomb.sh > "$WS/bomb.json" 2>/dev/null &
    sleep 2
    P=$(probe 5)
    wait %2 || true
    LOAD=$(cut -d' ' -f1 /proc/loadavg)
    touch "$WS/done"; wait
    python3 - "$WS/bomb.json" "$mode" "$P" "$IDLE" "$LOAD" "$(stats "$WS/rq")" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); mode, p, idle, load, rq = sys.argv[2:]
cpu = v["limits"]["cpu"]
print(f"| {mode} | cpu by {cpu['by']}, quota {cpu.get('quota_cpus')} CPUs, used {cpu.get('used_ms')} ms in {v['duration_ms']} ms "
      f"| host probe {int(p)/int(idle):.2f} of idle | runnable {rq} | load1 at end {load} |")
PY
    sleep 20  # let the load average settle between modes
done

echo
echo "## memory bomb: 3 GiB under --memory 512M"
for mode in cgroup off; do
    MIN=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
    rm -f "$WS/done"
    ( while [ ! -e "$WS/done" ]; do awk '/MemAvailable/ {print $2}' /proc/meminfo; sleep 0.05; done ) > "$WS/mem" &
    S=$(date +%s.%N)
    env AIRLOCK_SANDBOX_CGROUP=$mode $A --json exec --memory 512M --timeout 60 -- /usr/bin/python3 mem.py > "$WS/mem.json" 2>/dev/null || true
    E=$(date +%s.%N)
    touch "$WS/done"; wait
    python3 - "$WS/mem.json" "$mode" "$MIN" "$WS/mem" "$S" "$E" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); mode, before, f, s, e = sys.argv[2:]
low = min(int(x) for x in open(f))
m = v["limits"]["memory"]
print(f"| {mode} | exit {v['exit_code']}, ceiling {v.get('ceiling', {}).get('name')}, by {m['by']}, peak {m.get('peak_bytes')} "
      f"| {float(e)-float(s):.2f} s | host MemAvailable {int(before)//1024} MiB → lowest {low//1024} MiB |")
PY
done
