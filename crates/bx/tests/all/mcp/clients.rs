//! docs/MCP.md's client settings, loaded by the real clients: Claude Code, Codex and opencode from
//! npm at the versions `scripts/npm/clients` pins (installed by `scripts/test-deps`), each in a
//! `HOME` of its own with a broker started from that `HOME`, offline and with no login. Each
//! block is read from docs/MCP.md itself (the fenced block after `<!-- client: NAME -->`), so the
//! two cannot drift. A client must list boxmaker as connected (Codex: enabled, with docs/MCP.md's
//! command), and the tools it offers its model, read from its requests to a local model server
//! that refuses them, must hold boxmaker's and none of those docs/MCP.md turns off. Goose and
//! Cursor are not on npm: docs/MCP.md says their settings are untested.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use testkit::{BrokerProcess, RequestRecorder};

use super::{FAST, GRANTS};

/// The fenced block that follows the line `<!-- client: NAME -->` in docs/MCP.md, its
/// indentation (a block inside a list item) taken off.
fn guide_block(name: &str) -> String {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/MCP.md");
    let text = std::fs::read_to_string(&guide).unwrap();
    let marker = format!("<!-- client: {name} -->");
    let mut lines = text.lines().skip_while(|l| l.trim() != marker).skip(1);
    let fence = lines
        .next()
        .unwrap_or_else(|| panic!("docs/MCP.md has no block after {marker}"));
    assert!(fence.trim_start().starts_with("```"), "{marker}: {fence}");
    let indent = fence.len() - fence.trim_start().len();
    let mut block = String::new();
    for line in lines.take_while(|l| !l.trim_start().starts_with("```")) {
        block.push_str(line.get(indent..).unwrap_or(""));
        block.push('\n');
    }
    block
}

/// A client's program from the npm folder `scripts/test-deps` fills.
fn client(program: &str) -> PathBuf {
    testkit::npm::program("clients", program)
}

/// A broker started from its `HOME`, as an owner starts it, and that `HOME`'s `bin` holding
/// `bx`: the clients run `bx` as docs/MCP.md writes it, by name.
fn broker() -> BrokerProcess {
    let broker = BrokerProcess::start_from_home(GRANTS, FAST);
    let bin = broker.home().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(testkit::binary("bx").unwrap(), bin.join("bx")).unwrap();
    broker
}

/// `program ARGS` in the broker's work folder (the project) with only `HOME`, a `PATH` that
/// finds `bx`, the clients and node, and `env`: what a client started from the owner's shell
/// keeps that matters here, and no `XDG_RUNTIME_DIR`.
fn run(broker: &BrokerProcess, program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut path = OsString::from(broker.home().join("bin"));
    path.push(":");
    path.push(client("codex").parent().unwrap());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    Command::new(program)
        .args(args)
        .current_dir(&broker.work)
        .env_clear()
        .env("HOME", broker.home())
        .env("PATH", path)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Standard output and error of a run that must have succeeded.
fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Writes `text` to `path`, its folder made first.
fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The names in `body[key]`'s array, each at `name` (a JSON pointer).
fn names_at(body: &Value, key: &str, name: &str) -> BTreeSet<String> {
    body[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer(name).and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

// ---- Claude Code ----

/// docs/MCP.md's `claude mcp add` line, run by a shell in the project.
fn claude_add(broker: &BrokerProcess) {
    let line = guide_block("claude-code");
    assert!(line.starts_with("claude mcp add boxmaker"), "{line}");
    succeeded(&run(broker, Path::new("sh"), &["-c", &line], &[]));
}

/// Every tool Claude Code offers its model for one prompt (`claude -p`), its API a recorder.
fn claude_offers(broker: &BrokerProcess) -> BTreeSet<String> {
    let model = RequestRecorder::start().unwrap();
    let origin = model.origin();
    let output = run(
        broker,
        &client("claude"),
        &["-p", "hello"],
        &[
            ("ANTHROPIC_BASE_URL", &origin),
            ("ANTHROPIC_API_KEY", "sk-test-offline"),
            ("MCP_TIMEOUT", "600000"),
        ],
    );
    let requests: Vec<Value> = model
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages"))
        .map(|r| r.body)
        .collect();
    assert!(!requests.is_empty(), "{output:?}");
    requests
        .iter()
        .flat_map(|body| names_at(body, "tools", "/name"))
        .collect()
}

#[test]
fn readme_s_claude_code_command_adds_boxmaker_and_claude_lists_it_connected() {
    let broker = broker();
    claude_add(&broker);
    let listed = succeeded(&run(
        &broker,
        &client("claude"),
        &["mcp", "list"],
        &[("MCP_TIMEOUT", "600000")],
    ));
    let line = listed
        .lines()
        .find(|l| l.starts_with("boxmaker:"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("bx mcp --session claude-code"), "{line}");
    assert!(line.contains("Connected"), "{line}");
}

#[test]
fn with_readme_s_settings_claude_code_offers_boxmaker_s_tools_and_none_it_denies() {
    let broker = broker();
    claude_add(&broker);
    let boxmaker = ["clock", "find_tool", "call_tool"].map(|t| format!("mcp__boxmaker__{t}"));
    let settings: Value = serde_json::from_str(&guide_block("claude-code settings")).unwrap();
    let denied: Vec<&str> = settings["permissions"]["deny"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    // Without the settings the shell, file and web tools, and the one that makes git worktrees,
    // are offered: the check sees them, and docs/MCP.md denies each.
    let plain = claude_offers(&broker);
    for tool in [
        "Bash",
        "Read",
        "Edit",
        "Write",
        "NotebookEdit",
        "WebFetch",
        "WebSearch",
        "EnterWorktree",
    ] {
        assert!(plain.contains(tool), "{tool}: {plain:?}");
        assert!(
            denied.contains(&tool),
            "docs/MCP.md's deny list lacks {tool}"
        );
    }
    write(
        &broker.work.join(".claude/settings.json"),
        &guide_block("claude-code settings"),
    );
    let offered = claude_offers(&broker);
    for tool in &boxmaker {
        assert!(offered.contains(tool), "{tool}: {offered:?}");
    }
    for tool in &denied {
        assert!(
            !offered.contains(*tool),
            "{tool} is still offered: {offered:?}"
        );
    }
}

// ---- Codex ----

/// The provider the Codex runs send their model requests to (appended after docs/MCP.md's block:
/// tables only, so docs/MCP.md's top-level keys stay top-level).
fn codex_provider(model: &RequestRecorder) -> String {
    format!(
        "\n[model_providers.recorder]\nname = \"recorder\"\nbase_url = \"{}/v1\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
        model.origin()
    )
}

/// `codex ARGS` with `config` as `~/.codex/config.toml`.
fn codex(broker: &BrokerProcess, config: &str, args: &[&str]) -> Output {
    write(&broker.home().join(".codex/config.toml"), config);
    run(broker, &client("codex"), args, &[])
}

/// What Codex offers its model for one prompt (`codex exec`) with `config` and `model` (none:
/// Codex's default): every tool's name (or type, for a tool without one) at any depth, the
/// tools its code mode's `exec` declares, and the whole request as text.
fn codex_offers(
    broker: &BrokerProcess,
    config: &str,
    model: Option<&str>,
) -> (BTreeSet<String>, String) {
    let server = RequestRecorder::start().unwrap();
    let mut args = vec![
        "exec",
        "--skip-git-repo-check",
        "-c",
        "model_provider=recorder",
    ];
    args.extend(["-c", "mcp_servers.boxmaker.startup_timeout_sec=600"]);
    if let Some(model) = model {
        args.extend(["-m", model]);
    }
    args.push("hello");
    let output = codex(
        broker,
        &format!("{config}{}", codex_provider(&server)),
        &args,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    // `codex exec` goes on with its defaults when config.toml does not load.
    assert!(!stderr.contains("Error loading config"), "{stderr}");
    let requests: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/responses"))
        .map(|r| r.body)
        .collect();
    assert!(!requests.is_empty(), "{stderr}");
    let mut names = BTreeSet::new();
    for body in &requests {
        collect_codex_tools(body, &mut names);
    }
    (names, serde_json::to_string(&requests).unwrap())
}

/// Adds the name (or type) of every tool in `value`'s `tools` arrays, at any depth, and the
/// tools a code-mode `exec` description declares (`declare const tools: { NAME(`).
fn collect_codex_tools(value: &Value, names: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(tools) = map.get("tools").and_then(Value::as_array) {
                for tool in tools {
                    if let Some(name) = tool
                        .get("name")
                        .or(tool.get("type"))
                        .and_then(Value::as_str)
                    {
                        names.insert(name.to_string());
                    }
                    let description = tool.get("description").and_then(Value::as_str);
                    for part in description
                        .unwrap_or("")
                        .split("declare const tools: { ")
                        .skip(1)
                    {
                        if let Some((name, _)) = part.split_once('(') {
                            names.insert(name.to_string());
                        }
                    }
                }
            }
            map.values().for_each(|v| collect_codex_tools(v, names));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_codex_tools(v, names)),
        _ => {}
    }
}

/// docs/MCP.md's Codex block from its `[mcp_servers.boxmaker]` table on: the server alone, without
/// the keys that turn Codex's own tools off.
fn codex_server_only() -> String {
    let block = guide_block("codex");
    let at = block.find("[mcp_servers.boxmaker]").unwrap();
    block[at..].to_string()
}

#[test]
fn readme_s_codex_block_loads_and_codex_lists_boxmaker_enabled_with_its_command() {
    let broker = broker();
    let config = guide_block("codex");
    let listed = succeeded(&codex(&broker, &config, &["mcp", "list"]));
    let line = listed
        .lines()
        .find(|l| l.starts_with("boxmaker "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("mcp --session codex"), "{line}");
    assert!(line.contains("enabled"), "{line}");
    let got: Value = serde_json::from_str(&succeeded(&codex(
        &broker,
        &config,
        &["mcp", "get", "boxmaker", "--json"],
    )))
    .unwrap();
    assert_eq!(got["enabled"], true, "{got}");
    assert_eq!(got["transport"]["command"], "bx", "{got}");
    assert_eq!(
        got["transport"]["args"],
        serde_json::json!(["mcp", "--session", "codex"]),
        "{got}"
    );
    // The spelling README once had, `web_search` under `[features]`, is refused: a listing fails
    // on a block Codex does not load.
    let refused = codex(
        &broker,
        "[features]\nweb_search = \"disabled\"\n",
        &["mcp", "list"],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("expected a boolean"),
        "{refused:?}"
    );
}

#[test]
fn with_readme_s_codex_block_codex_offers_boxmaker_and_no_shell_image_or_web_search() {
    let broker = broker();
    let turned_off = [
        "exec_command",
        "write_stdin",
        "shell",
        "view_image",
        "web_search",
    ];
    // Codex's default model (its code mode declares the tools inside `exec`) and a model it
    // does not know (plain tools, web search among them).
    for model in [None, Some("boxmaker-test-model")] {
        let (plain, _) = codex_offers(&broker, &codex_server_only(), model);
        assert!(plain.contains("exec_command"), "{model:?}: {plain:?}");
        assert!(plain.contains("view_image"), "{model:?}: {plain:?}");
        if model.is_some() {
            assert!(plain.contains("web_search"), "{plain:?}");
        }
        let (offered, request) = codex_offers(&broker, &guide_block("codex"), model);
        for tool in turned_off {
            assert!(!offered.contains(tool), "{model:?}: {tool} in {offered:?}");
        }
        // boxmaker's tools: a namespace Codex names to the model (its tools found on demand).
        assert!(request.contains("mcp__boxmaker"), "{model:?}: {request}");
    }
}

// ---- opencode ----

/// docs/MCP.md's opencode block as `~/.config/opencode/opencode.json`.
fn opencode_config(broker: &BrokerProcess, config: &str) {
    write(
        &broker.home().join(".config/opencode/opencode.json"),
        config,
    );
}

/// The tools opencode offers its model for one prompt (`opencode run`): its model a
/// recorder behind an OpenAI-compatible provider, set in the project's `opencode.json`.
fn opencode_offers(broker: &BrokerProcess) -> BTreeSet<String> {
    let model = RequestRecorder::start().unwrap();
    let provider = serde_json::json!({
        "provider": { "recorder": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "recorder",
            "options": { "baseURL": format!("{}/v1", model.origin()), "apiKey": "test" },
            "models": { "test": { "name": "test", "tool_call": true } }
        } },
        "model": "recorder/test"
    });
    write(&broker.work.join("opencode.json"), &provider.to_string());
    let output = run(broker, &client("opencode"), &["run", "hello"], &[]);
    let requests: Vec<Value> = model
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| r.body)
        .collect();
    assert!(!requests.is_empty(), "{output:?}");
    requests
        .iter()
        .flat_map(|body| names_at(body, "tools", "/function/name"))
        .collect()
}

#[test]
fn readme_s_opencode_block_loads_and_opencode_lists_boxmaker_connected() {
    let broker = broker();
    opencode_config(&broker, &guide_block("opencode"));
    let listed = succeeded(&run(&broker, &client("opencode"), &["mcp", "list"], &[]));
    let line = listed
        .lines()
        .find(|l| l.contains(" boxmaker "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains('✓') && line.contains("connected"), "{listed}");
    assert!(listed.contains("bx mcp --session opencode"), "{listed}");
}

#[test]
fn with_readme_s_opencode_block_opencode_offers_boxmaker_s_tools_and_none_it_denies() {
    let broker = broker();
    let config: Value = serde_json::from_str(&guide_block("opencode")).unwrap();
    let denied: Vec<String> = config["permission"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| *v == "deny")
        .map(|(k, _)| k.clone())
        .collect();
    // Without the permissions its shell, file and web tools are offered: the check sees them.
    let mut server_only = config.clone();
    server_only.as_object_mut().unwrap().remove("permission");
    opencode_config(&broker, &server_only.to_string());
    let plain = opencode_offers(&broker);
    for tool in ["bash", "read", "edit", "write", "glob", "grep", "webfetch"] {
        assert!(plain.contains(tool), "{tool}: {plain:?}");
    }
    opencode_config(&broker, &guide_block("opencode"));
    let offered = opencode_offers(&broker);
    for tool in ["clock", "find_tool", "call_tool"] {
        let tool = format!("boxmaker_{tool}");
        assert!(offered.contains(&tool), "{tool}: {offered:?}");
    }
    // `edit` denies every tool that changes a file (`edit`, `write`, `patch`).
    for tool in denied.iter().map(String::as_str).chain(["write", "patch"]) {
        assert!(
            !offered.contains(tool),
            "{tool} is still offered: {offered:?}"
        );
    }
}
