"""The evaluation's scenario server: one assistant's tools, served over MCP stdio on the official
Python MCP SDK (PyPI `mcp`), as a downstream server of boxmaker's gateway.

    python server.py SCENARIO.toml

serves the `[[tool]]` tables of that scenario file (see eval/README in docs/EVALUATION.md):
each tool's name, description, arguments (`args`: name -> JSON type, `optional` the ones that
may be left out) and `read_only` (its readOnlyHint). A call answers with the text of the
tool's first `[[tool.result]]` whose `when` arguments all equal the call's (compared as
text), else with the tool's `otherwise` text. The answers are canned: the server keeps no
state, so sessions are independent and every run gives the same results.
"""

import sys
import tomllib

import anyio
import mcp.server.stdio
import mcp.types as types
from mcp.server.lowlevel import Server

TYPES = {
    "string": {"type": "string"},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "boolean": {"type": "boolean"},
    "strings": {"type": "array", "items": {"type": "string"}},
}


def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def schema(tool):
    args = tool.get("args", {})
    optional = set(tool.get("optional", []))
    unknown = optional - set(args)
    if unknown:
        raise SystemExit(f"tool {tool['name']}: optional names no argument: {sorted(unknown)}")
    properties = {}
    for name, kind in args.items():
        if kind not in TYPES:
            raise SystemExit(f"tool {tool['name']}: argument {name} has unknown type {kind!r}")
        properties[name] = dict(TYPES[kind])
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name in args if name not in optional],
        "additionalProperties": False,
    }


def text_of(value):
    if isinstance(value, list):
        return ",".join(text_of(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def answer(tool, arguments):
    for result in tool.get("result", []):
        when = result.get("when", {})
        if all(text_of(arguments.get(k)) == text_of(v) for k, v in when.items()):
            return result["text"]
    return tool.get("otherwise", "done")


def main():
    scenario = load(sys.argv[1])
    tools = {tool["name"]: tool for tool in scenario.get("tool", [])}
    server = Server(scenario.get("server", "scenario"))

    @server.list_tools()
    async def list_tools():
        return [
            types.Tool(
                name=name,
                description=tool["description"],
                inputSchema=schema(tool),
                annotations=types.ToolAnnotations(readOnlyHint=bool(tool.get("read_only", False))),
            )
            for name, tool in tools.items()
        ]

    @server.call_tool()
    async def call_tool(name, arguments):
        tool = tools.get(name)
        if tool is None:
            raise ValueError(f"no tool {name}")
        return [types.TextContent(type="text", text=answer(tool, arguments or {}))]

    async def run():
        async with mcp.server.stdio.stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
