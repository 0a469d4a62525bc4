// npm's TypeScript MCP SDK (@modelcontextprotocol/sdk) as the client of `bx mcp`, for
// boxmaker's tests (crates/bx/tests/all/mcp/typescript.rs).
//
// usage: node typescript.cjs SDK_FOLDER PLAN_JSON -- COMMAND [ARGS...]
//
// SDK_FOLDER is the folder scripts/test-deps installs the SDK into (its node_modules inside).
// COMMAND is started by the SDK's StdioClientTransport with no `env`, so with the SDK's default
// filtered environment (getDefaultEnvironment: HOME, LOGNAME, PATH, SHELL, TERM, USER). PLAN_JSON
// is a list of steps, each printing one JSON line:
//   {"op": "env"}   -> {"inherited": [the names getDefaultEnvironment keeps from this process]}
//   {"op": "list"}  -> {"tools": [...]}
//   {"op": "call", "name": ..., "arguments": {...}, "timeout": MS, "reset": BOOL}
//                   -> {"isError", "text", "structuredContent", "meta"}, or {"error", "code"} when
//                      the request fails (a timeout is code -32001); while it waits, one line
//                      {"progress": VALUE, "message": ..., "seen": N} per progress notification,
//                      N counting them. "timeout" and "reset" are the SDK's request options
//                      `timeout` and `resetTimeoutOnProgress` (SDK defaults when absent).
// and at the end {"done": true}.
"use strict";

const path = require("node:path");
const { createRequire } = require("node:module");

const [sdkFolder, planText, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--" || !command) {
  console.error("usage: node typescript.cjs SDK_FOLDER PLAN_JSON -- COMMAND [ARGS...]");
  process.exit(2);
}
const sdk = createRequire(path.join(sdkFolder, "package.json"));
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const {
  StdioClientTransport,
  getDefaultEnvironment,
} = sdk("@modelcontextprotocol/sdk/client/stdio.js");

function print(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

async function call(client, step) {
  let seen = 0;
  const options = {
    onprogress: (progress) => {
      seen += 1;
      print({ progress: progress.progress, message: progress.message, seen });
    },
  };
  if (step.timeout !== undefined) options.timeout = step.timeout;
  if (step.reset !== undefined) options.resetTimeoutOnProgress = step.reset;
  try {
    const result = await client.callTool(
      { name: step.name, arguments: step.arguments || {} },
      undefined,
      options,
    );
    const text = (result.content || []).map((c) => c.text || "").join("");
    print({
      isError: Boolean(result.isError),
      text,
      structuredContent: result.structuredContent,
      meta: result._meta,
    });
  } catch (e) {
    print({ error: String(e && e.message), code: e && e.code });
  }
}

async function main() {
  const plan = JSON.parse(planText);
  // No `env`: the SDK's default, filtered environment.
  const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
  const client = new Client({ name: "boxmaker-ts-test-client", version: "1" });
  await client.connect(transport);
  for (const step of plan) {
    if (step.op === "env") {
      print({ inherited: Object.keys(getDefaultEnvironment()) });
    } else if (step.op === "list") {
      const listed = await client.listTools();
      print({ tools: listed.tools });
    } else if (step.op === "call") {
      await call(client, step);
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  }
  print({ done: true });
  await client.close();
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
