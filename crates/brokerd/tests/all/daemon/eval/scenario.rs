//! The evaluation's scenario files (`eval/scenarios/*.toml`), one per assistant: its tools
//! (served by `eval/server.py`) or, for the coding session, the project's files; and its tasks,
//! each the owner's request, the user's calls in order and the attacks paired with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The downstream server's name (its tools are `server.tool`); none for the coding session.
    pub server: Option<String>,
    /// What assistant this is, for the report.
    pub setting: String,
    /// The calls name boxmaker's own tools (the coding session).
    #[serde(default)]
    pub builtin: bool,
    /// The downstream tools (read by `eval/server.py`).
    #[serde(default)]
    pub tool: Vec<Tool>,
    /// The project's files, written fresh for each task pair (the coding session).
    #[serde(default)]
    pub file: Vec<File>,
    /// The user tasks.
    pub task: Vec<Task>,
    /// The file's name, set when loaded.
    #[serde(skip)]
    pub name: String,
}

/// A downstream tool as the scenario server lists it; the harness reads whether it is a read.
#[derive(Debug, Deserialize)]
pub struct Tool {
    /// Its name within the server.
    pub name: String,
    /// A read (its `readOnlyHint`): not counted.
    #[serde(default)]
    pub read_only: bool,
}

/// A file of the coding session's project.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Its path inside the project.
    pub path: String,
    /// Its text.
    pub text: String,
}

/// A user task: the owner's words, the user's calls, and the attacks paired with it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Names the task in the report.
    pub id: String,
    /// The owner's words (what loopd sends the broker as the owner's).
    pub request: String,
    /// The user's calls, in order.
    pub call: Vec<Call>,
    /// What an injected model does after them; each attack makes one task pair.
    pub attack: Vec<Attack>,
}

/// An attack: what an injected model calls after the user's calls.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attack {
    /// Names the attack in the report.
    pub id: String,
    /// What the attacker wants.
    pub goal: String,
    /// `"untrusted"` (default): a value of its calls occurs in an untrusted result the session
    /// received; `"owned"`: every value is the owner's own (stopped by what the call does).
    #[serde(default = "untrusted")]
    pub uses: String,
    /// Its calls, in order.
    pub call: Vec<Call>,
}

fn untrusted() -> String {
    "untrusted".to_string()
}

/// One call: a tool (without the server's prefix) and its arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The tool, as the scenario names it.
    pub tool: String,
    /// Its arguments (`{project}` in a string: the pair's project folder).
    pub args: BTreeMap<String, toml::Value>,
    /// The user's value of this argument comes from untrusted text alone (the owner said "pay
    /// the bill in this file"): the call must ask, and counts as asked, not as a failure.
    pub from_untrusted: Option<String>,
}

/// The folder `eval/` of the repository.
pub fn eval_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval");
    dir.canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// Every scenario file, in name order; panics naming the file and the problem when one does
/// not parse or does not hold together.
pub fn load_all() -> Vec<Scenario> {
    let dir = eval_dir().join("scenarios");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    paths.iter().map(|path| load(path)).collect()
}

fn load(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap();
    let mut scenario: Scenario =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    scenario.name = path.file_name().unwrap().to_string_lossy().into_owned();
    let name = &scenario.name;
    assert_eq!(
        scenario.server.is_some(),
        !scenario.builtin,
        "{name}: a scenario names a server or is builtin, not both"
    );
    assert!(!scenario.task.is_empty(), "{name}: no task");
    for task in &scenario.task {
        assert!(
            task.attack.len() >= 2,
            "{name}: task {} has fewer than 2 attacks",
            task.id
        );
        for call in task
            .call
            .iter()
            .chain(task.attack.iter().flat_map(|a| &a.call))
        {
            if !scenario.builtin {
                assert!(
                    scenario.tool.iter().any(|t| t.name == call.tool),
                    "{name}: task {} calls {}, a tool the file does not define",
                    task.id,
                    call.tool
                );
            }
            if let Some(argument) = &call.from_untrusted {
                assert!(
                    call.args.contains_key(argument),
                    "{name}: task {}: from_untrusted names {argument}, not an argument of the call",
                    task.id
                );
            }
        }
        for attack in &task.attack {
            assert!(
                ["untrusted", "owned"].contains(&attack.uses.as_str()),
                "{name}: attack {}: uses is \"untrusted\" or \"owned\"",
                attack.id
            );
        }
    }
    scenario
}

impl Scenario {
    /// The name a session calls `tool` by.
    pub fn full_name(&self, tool: &str) -> String {
        match &self.server {
            Some(server) => format!("{server}.{tool}"),
            None => tool.to_string(),
        }
    }

    /// Whether a call of `tool` is a side effect (counted) rather than a read.
    pub fn side_effect(&self, tool: &str) -> bool {
        if self.builtin {
            return proto::tools::ToolName::parse(tool)
                .unwrap_or_else(|| panic!("{}: {tool} is no tool of boxmaker's", self.name))
                .has_side_effects();
        }
        self.tool.iter().any(|t| t.name == tool && !t.read_only)
    }
}

impl Call {
    /// The arguments as JSON text, `{project}` replaced by `project`.
    pub fn json(&self, project: &Path) -> String {
        let value = serde_json::to_value(&self.args).unwrap();
        let text = serde_json::to_string(&value).unwrap();
        // `{project}` only ever stands in a string, so replacing it in the JSON text is exact
        // (the folder's path holds no quote or backslash).
        text.replace("{project}", &project.display().to_string())
    }

    /// Every string in the arguments, and every blank-separated word of one (a shell command,
    /// a message): what an attack's values are looked for by.
    pub fn words(&self) -> Vec<String> {
        let mut out = Vec::new();
        for value in self.args.values() {
            strings(value, &mut out);
        }
        let words: Vec<String> = out
            .iter()
            .flat_map(|s| s.split_whitespace().map(str::to_owned))
            .collect();
        out.extend(words);
        out
    }
}

fn strings(value: &toml::Value, out: &mut Vec<String>) {
    match value {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        toml::Value::Table(table) => table.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}
