#!/usr/bin/env python3
"""What verdict integrity costs: `airlock verify` after a one-line change, two builds side by
side (the build before the integrity work and this one), on real projects set up the way their
developers do (scripts/ci-deps-realprojects.sh puts them under target/realprojects/).

    python3 scripts/bench-integrity.py OLD_AIRLOCK NEW_AIRLOCK [ROUNDS] [PROJECT ...]

Each build gets its own copy of each project (so each keeps its own caches), the same staged
one-line change, one warm-up verify, then ROUNDS verifies alternating old/new. Prints the
median wall time of each and the ratio new/old, per project.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "target", "realprojects")
# project: (file to change, line to append)
CHANGES = {
    "semver": ("src/lib.rs", "// bench: one-line change\n"),
    "packaging": ("src/packaging/version.py", "# bench: one-line change\n"),
    "gensync-jest": ("index.js", "// bench: one-line change\n"),
    "go-cmp": ("cmp/compare.go", "// bench: one-line change\n"),
}


def airlock(binary, ws, home, *args, check=True):
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    env["XDG_CONFIG_HOME"] = os.path.join(home, "config")
    env["XDG_STATE_HOME"] = os.path.join(home, "state")
    p = subprocess.run(
        [binary, "--workspace", ws, "--mode", "build", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if check and p.returncode not in (0, 4):
        raise SystemExit(f"{binary} {args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def prepare(binary, project, tmp, tag):
    src = os.path.join(REAL, project)
    ws = os.path.join(tmp, f"{project}-{tag}")
    shutil.copytree(src, ws, symlinks=True)
    home = os.path.join(tmp, f"home-{tag}")
    os.makedirs(home, exist_ok=True)
    rel, line = CHANGES[project]
    with open(os.path.join(ws, rel)) as f:
        body = f.read()
    args = json.dumps({"path": rel, "content": body + line})
    airlock(binary, ws, home, "call", "write_file", args)
    return ws, home


def verify(binary, ws, home):
    start = time.monotonic()
    p = airlock(binary, ws, home, "--json", "verify", check=False)
    took = time.monotonic() - start
    try:
        v = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"verify did not print JSON: {p.stdout}\n{p.stderr}")
    return took, v.get("verdict"), v.get("tests")


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    projects = sys.argv[4:] or list(CHANGES)
    with tempfile.TemporaryDirectory() as tmp:
        for project in projects:
            if not os.path.isdir(os.path.join(REAL, project)):
                print(f"{project}: not set up (bash scripts/ci-deps-realprojects.sh)")
                continue
            a = prepare(old, project, tmp, "old")
            b = prepare(new, project, tmp, "new")
            ta, va, ca = verify(old, *a)
            tb, vb, cb = verify(new, *b)
            times = {"old": [], "new": []}
            for _ in range(rounds):
                for tag, binary, (ws, home) in (("old", old, a), ("new", new, b)):
                    t, _, _ = verify(binary, ws, home)
                    times[tag].append(t)
            mo, mn = statistics.median(times["old"]), statistics.median(times["new"])
            print(
                f"{project:14} old {mo:6.2f} s ({va}, {ca})  new {mn:6.2f} s ({vb}, {cb})  "
                f"new/old {mn / mo:5.3f}  (first verify: old {ta:.2f} s, new {tb:.2f} s)"
            )


if __name__ == "__main__":
    main()
