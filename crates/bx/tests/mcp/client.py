"""The official Python MCP SDK as the client of `bx mcp`, for boxmaker's tests.

usage: client.py MODE PLAN_JSON -- COMMAND [ARGS...]
       client.py http-MODE PLAN_JSON -- URL TOKEN

MODE is `modern` (protocol 2026-07-28: no initialize, versions in each request's _meta),
`auto` (the SDK's default: it probes `server/discover`, falling back to the handshake),
`legacy` (the initialize handshake of the SDK's newest earlier revision) or `v1` (an SDK 1.x
client, which only has the handshake); `http-` before it speaks streamable HTTP to URL with
`Authorization: Bearer TOKEN` instead of starting COMMAND on stdio. PLAN_JSON is a list of steps, each
{"op": "list"} or {"op": "call", "name": ..., "arguments": {...}} (or "cancel", "sleep", and
"wait_file" until a file exists); one JSON line is printed for each list or call step, and a
final {"done": true, "protocol": ...}.
"""

import asyncio
import json
import os
import sys

import mcp


def dump_result(result):
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = "".join(c.get("text", "") for c in data.get("content", []))
    return {
        "isError": bool(data.get("isError", False)),
        "text": text,
        "structuredContent": data.get("structuredContent"),
        "meta": data.get("_meta"),
    }


async def run_steps(call_list, call_tool, plan, progress):
    for step in plan:
        if step["op"] == "list":
            tools = await call_list()
            print(json.dumps({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools]}), flush=True)
        elif step["op"] == "call":
            notes = []

            async def on_progress(value, total, message):
                notes.append(message)
                progress(message)

            result = await call_tool(step["name"], step.get("arguments", {}), on_progress)
            out = dump_result(result)
            out["progress"] = notes
            print(json.dumps(out), flush=True)
        elif step["op"] == "cancel":
            # Start the call, wait for its first progress note (it waits for the owner), then
            # cancel it, as a user pressing escape would.
            noted = asyncio.Event()

            async def on_note(value, total, message):
                progress(message)
                noted.set()

            task = asyncio.ensure_future(call_tool(step["name"], step.get("arguments", {}), on_note))
            await asyncio.wait_for(noted.wait(), 30)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            print(json.dumps({"cancelled": True}), flush=True)
        elif step["op"] == "sleep":
            await asyncio.sleep(step["seconds"])
        elif step["op"] == "wait_file":
            # The test creates the file when what it waits for has happened (the broker has
            # closed the idle connection); at most a minute.
            for _ in range(3000):
                if os.path.exists(step["path"]):
                    break
                await asyncio.sleep(0.02)
            else:
                raise SystemExit(f"{step['path']} never appeared")
        else:
            raise SystemExit(f"unknown step {step!r}")


def announce(message):
    # The test waits for this line to approve the call in `bx`.
    print(json.dumps({"progress": message}), flush=True)


async def elicit(context, params):
    """Answers an elicitation as BOXMAKER_TEST_ELICIT says (approve, refuse, text:ANSWER,
    decline, cancel, or hang: a user who never answers)."""
    answer = os.environ.get("BOXMAKER_TEST_ELICIT", "cancel")
    print(json.dumps({"elicited": params.message}), flush=True)
    if answer == "hang":
        await asyncio.Event().wait()
    if answer in ("approve", "refuse"):
        return mcp.types.ElicitResult(action="accept", content={"decision": answer})
    if answer.startswith("text:"):
        return mcp.types.ElicitResult(action="accept", content={"answer": answer[len("text:"):]})
    return mcp.types.ElicitResult(action=answer)


async def main():
    mode, plan_text = sys.argv[1], sys.argv[2]
    target = sys.argv[sys.argv.index("--") + 1:]
    plan = json.loads(plan_text)
    info = mcp.Implementation(name="boxmaker-test-client", version="1")
    callback = elicit if "BOXMAKER_TEST_ELICIT" in os.environ else None
    http = mode.startswith("http-")
    mode = mode.removeprefix("http-")
    if http:
        url, token = target
        headers = {"Authorization": f"Bearer {token}"}
    else:
        params = mcp.StdioServerParameters(command=target[0], args=target[1:])
    if mode in ("modern", "auto", "legacy"):
        pin = {"modern": "2026-07-28", "auto": "auto", "legacy": "legacy"}[mode]
        if http:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            server = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        else:
            server = params
        async with mcp.Client(server, mode=pin, client_info=info, raise_exceptions=True, cache=None,
                              elicitation_callback=callback) as client:
            await run_steps(
                client.list_tools,
                lambda n, a, p: client.call_tool(n, a, progress_callback=p),
                plan,
                announce,
            )
            print(json.dumps({"done": True, "protocol": client.protocol_version}), flush=True)
    elif mode == "v1":
        if http:
            from mcp.client.streamable_http import streamablehttp_client

            transport = streamablehttp_client(url, headers=headers)
        else:
            from mcp.client.stdio import stdio_client

            transport = stdio_client(params)
        async with transport as streams:
            read, write = streams[0], streams[1]
            async with mcp.ClientSession(read, write, client_info=info, elicitation_callback=callback) as session:
                init = await session.initialize()
                await run_steps(
                    session.list_tools,
                    lambda n, a, p: session.call_tool(n, a, progress_callback=p),
                    plan,
                    announce,
                )
                print(json.dumps({"done": True, "protocol": init.protocolVersion}), flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


asyncio.run(main())
