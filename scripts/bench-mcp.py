#!/usr/bin/env python3
"""Round-trip latency of `airlock mcp` as an MCP client sees it (official Python SDK, stdio).

Measures, per lifecycle (handshake "legacy" and 2026-07-28 "auto"):
  - read_file of a small file (the whole chain: permission, jail, validation, staged view);
  - tools/list (protocol and serialisation only, no kernel call beyond the registry);
  - ping (legacy only: the bare protocol round trip, the floor under everything else).

Usage: scripts/bench-mcp.py [--bin target/release/airlock] [--calls 500] [--warmup 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def percentile(sorted_ms: list[float], p: float) -> float:
    if not sorted_ms:
        return float("nan")
    k = max(0, min(len(sorted_ms) - 1, round(p / 100 * (len(sorted_ms) - 1))))
    return sorted_ms[k]


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "mean_ms": statistics.fmean(ms),
        "max_ms": ms[-1],
    }


async def bench(binary: str, workspace: Path, mode: str, calls: int, warmup: int) -> dict[str, dict[str, float]]:
    params = StdioServerParameters(
        command=binary, args=["--workspace", str(workspace), "mcp"], env={"AIRLOCK_LOG": "error"}
    )
    out: dict[str, dict[str, float]] = {}
    async with Client(params, mode=mode, cache=None) as client:
        for _ in range(warmup):
            r = await client.call_tool("read_file", {"path": "src/lib.rs"})
            if r.is_error:
                raise SystemExit(f"read_file failed: {r.content}")
        samples = []
        for _ in range(calls):
            t = time.perf_counter()
            await client.call_tool("read_file", {"path": "src/lib.rs"})
            samples.append(time.perf_counter() - t)
        out["read_file"] = summary(samples)
        samples = []
        for _ in range(calls):
            t = time.perf_counter()
            await client.list_tools()
            samples.append(time.perf_counter() - t)
        out["tools/list"] = summary(samples)
        if mode == "legacy":  # ping exists only on handshake-era sessions
            samples = []
            for _ in range(calls):
                t = time.perf_counter()
                await client.send_ping()
                samples.append(time.perf_counter() - t)
            out["ping"] = summary(samples)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/airlock")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "src").mkdir(parents=True)
        (ws / "src" / "lib.rs").write_text("".join(f"pub fn f{i}() -> u32 {{ {i} }}\n" for i in range(60)))
        results = {mode: anyio.run(bench, args.bin, ws, mode, args.calls, args.warmup) for mode in ("legacy", "auto")}

    if args.json:
        print(json.dumps({"machine": platform.platform(), "calls": args.calls, "results": results}, indent=2))
        return
    print(f"{args.calls} calls each after {args.warmup} warm-up calls; {platform.platform()}")
    print(f"{'lifecycle':<8} {'request':<11} {'median':>9} {'p90':>9} {'p99':>9} {'mean':>9} {'max':>9}")
    for mode, rows in results.items():
        for name, s in rows.items():
            print(
                f"{mode:<8} {name:<11} {s['median_ms']:>7.3f}ms {s['p90_ms']:>7.3f}ms {s['p99_ms']:>7.3f}ms "
                f"{s['mean_ms']:>7.3f}ms {s['max_ms']:>7.3f}ms"
            )


if __name__ == "__main__":
    main()
