#!/usr/bin/env python3
"""The git read tools as an agent calls them: an official-SDK MCP client calling a running
`airlock mcp`, beside `subprocess.run` of the git CLI in the same script (medians of N calls).

    python3 scripts/bench-git-mcp.py AIRLOCK_BINARY REPOSITORY [N]   (N default 25)

Called by scripts/bench-git.sh when the `mcp` package is importable.
"""
import os
import statistics
import subprocess
import sys
import time

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

binary, repo = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 25
home = os.environ.get("HOME", "/tmp")
CALLS = [
    ("git_status", {"limit": 100000},
     ["git", "-c", "core.fsmonitor=", "status", "--porcelain=v2", "--branch", "--untracked-files=normal"]),
    ("git_log", {"max_count": 50}, ["git", "log", "-n", "50"]),
]


def median_ms(xs):
    return statistics.median(xs) * 1000


async def main():
    env = {"AIRLOCK_LOG": "error", "HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    params = StdioServerParameters(command=binary, args=["--workspace", repo, "mcp"], env=env)
    over_mcp = {}
    async with Client(params, mode="legacy", cache=None) as c:
        for name, args, _ in CALLS:
            r = await c.call_tool(name, args)
            assert not r.is_error, r.content
            xs = []
            for _ in range(n):
                t = time.perf_counter()
                r = await c.call_tool(name, args)
                xs.append(time.perf_counter() - t)
                assert not r.is_error
            over_mcp[name] = median_ms(xs)
    for name, _, cmd in CALLS:
        xs = []
        for _ in range(n):
            t = time.perf_counter()
            subprocess.run(cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL, check=True)
            xs.append(time.perf_counter() - t)
        g = median_ms(xs)
        print(f"{name:12s} git CLI {g:7.1f} ms   airlock over MCP {over_mcp[name]:7.1f} ms   ratio {over_mcp[name] / g:.2f}")


anyio.run(main)
