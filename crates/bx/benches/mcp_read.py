"""One MCP server's read latency, for `cargo bench -p bx --bench mcp`.

usage: mcp_read.py RUNS TOOL ARGUMENTS_JSON -- COMMAND [ARGS...]

Connects with the official Python SDK (the SDK's default negotiation) over stdio, makes 10
unmeasured calls, then RUNS calls of TOOL one after another, and prints one JSON line: the
protocol spoken, the median and p99 in milliseconds and calls per second.

With BOXMAKER_BENCH_BARRIER=DIR (several clients at once, `gateway.rs`), after the unmeasured
calls it creates DIR/ready-PID and waits for DIR/go before measuring, and the line also holds
every call's time (`times_ms`) and when the last call ended (`ended_at`, Unix seconds).
"""

import asyncio
import json
import os
import statistics
import sys
import time

import mcp


async def main():
    runs, tool, arguments = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    command = sys.argv[sys.argv.index("--") + 1:]
    params = mcp.StdioServerParameters(command=command[0], args=command[1:])
    async with mcp.Client(params, raise_exceptions=True, cache=None) as client:
        for _ in range(10):
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                raise SystemExit(f"{tool} failed: {result}")
        barrier = os.environ.get("BOXMAKER_BENCH_BARRIER")
        if barrier:
            open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
            while not os.path.exists(os.path.join(barrier, "go")):
                await asyncio.sleep(0.005)
        times = []
        started = time.perf_counter()
        for _ in range(runs):
            t = time.perf_counter()
            result = await client.call_tool(tool, arguments)
            times.append(time.perf_counter() - t)
            if result.is_error:
                raise SystemExit(f"{tool} failed: {result}")
        total = time.perf_counter() - started
        ended_at = time.time()
        extra = {"times_ms": [t * 1000 for t in times], "ended_at": ended_at} if barrier else {}
        times.sort()
        print(json.dumps({
            **extra,
            "protocol": client.protocol_version,
            "median_ms": statistics.median(times) * 1000,
            "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000,
            "calls_per_s": runs / total,
        }), flush=True)


asyncio.run(main())
