#!/usr/bin/env python3
"""Two airlock builds, one command each, run alternately (A B, B A, ...) so that drift on a shared
machine hits both alike; prints the two medians and their ratio.

Usage: scripts/bench-ab-alternating.py BEFORE_BIN BEFORE_WS AFTER_BIN AFTER_WS N [ARGS...]
ARGS default to `exec -- true`; each run is `BIN --workspace WS --mode build ARGS`. Five warm-up
rounds are not counted. scripts/bench-ab.sh makes suitable 10,000-file workspaces."""
import os
import statistics
import subprocess
import sys
import time

pairs = [(sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])]
n = int(sys.argv[5])
args = sys.argv[6:] or ["exec", "--", "true"]
env = dict(os.environ, XDG_CONFIG_HOME=os.environ.get("XDG_CONFIG_HOME", "/tmp/airlock-ab-cfg"))
times = [[], []]
for i in range(n + 5):
    order = [0, 1] if i % 2 == 0 else [1, 0]
    for k in order:
        binary, ws = pairs[k]
        t0 = time.perf_counter()
        subprocess.run([binary, "--workspace", ws, "--mode", "build", *args], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i >= 5:
            times[k].append((time.perf_counter() - t0) * 1000)
a, b = statistics.median(times[0]), statistics.median(times[1])
print(f"before {a:.2f} ms  after {b:.2f} ms  after/before {b / a:.3f}  (n={n} each, alternating)")
