//! The runner with the box: each `shell` call runs in a fresh bubblewrap box
//! (`sandbox::spawn_boxed`) that binds the deciding grant's folders read-write, the
//! `[sandbox] read_only` folders read-only, masks boxmaker's protected folders inside them, and
//! has no network. Every other tool runs as the [`DirectRunner`] runs it (the in-process file
//! tools on the grant's directory descriptor; `http_fetch` outside the box until granted hosts
//! can reach one).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::config::SandboxConfig;
use super::runner::{DirectRunner, Outcome, RunContext, Runner, shell};
use crate::args::ToolArgs;
use crate::policy::{Allowed, Scope};

/// What the header of a boxed `shell` result says of its walls.
pub const BOXED: &str = "bubblewrap: only the grant's folders (read-write) and a read-only system; protected folders masked; no network; every capability dropped; own /proc and size-limited /tmp; processes, memory, CPU and file size limited";

/// What the header says when the owner switched the file walls off.
pub const UNBOXED: &str = "none: [sandbox] file_walls = false in brokerd.toml, so the command sees every file the broker's user can";

/// Runs `shell` in a box, everything else directly.
pub struct SandboxedRunner {
    /// The runner of every other tool (and of `shell` when the file walls are off).
    pub direct: DirectRunner,
    settings: SandboxConfig,
    /// `settings.read_only` with `~/` expanded.
    read_only: Vec<PathBuf>,
}

impl SandboxedRunner {
    /// The runner for `settings`, with `~/` in its folders meaning `home`.
    pub fn new(direct: DirectRunner, settings: SandboxConfig, home: &Path) -> SandboxedRunner {
        let read_only = settings
            .read_only
            .iter()
            .map(|p| match p.strip_prefix("~") {
                Ok(rest) => home.join(rest),
                Err(_) => p.clone(),
            })
            .collect();
        SandboxedRunner {
            direct,
            settings,
            read_only,
        }
    }

    fn policy(&self, allowed: &Allowed, context: &RunContext) -> sandbox::Policy {
        let read_write = match &allowed.scope {
            Some(Scope::Paths(paths)) => paths.clone(),
            _ => Vec::new(),
        };
        sandbox::Policy {
            // A toolchain folder that does not exist on this machine is left out, not an error.
            read_only: self
                .read_only
                .iter()
                .filter(|p| p.exists())
                .cloned()
                .collect(),
            read_write,
            masked: context.protected.folders().to_vec(),
            tmp_bytes: self.settings.tmp_mb.saturating_mul(1 << 20),
            limits: sandbox::Limits {
                cpu_seconds: context.limit.as_secs().saturating_add(1),
                processes: self.settings.processes,
                memory: self.settings.memory_mb.saturating_mul(1 << 20),
                ..sandbox::Limits::default()
            },
        }
    }
}

impl Runner for SandboxedRunner {
    fn run(&self, allowed: &Allowed, context: &RunContext) -> Outcome {
        let ToolArgs::Shell(args) = &allowed.args else {
            return self.direct.run(allowed, context);
        };
        let mut options = tools::shell::ShellOptions {
            timeout: context.limit,
            ..tools::shell::ShellOptions::default()
        };
        let walls = if self.settings.file_walls {
            options.policy = Some(self.policy(allowed, context));
            BOXED
        } else {
            UNBOXED
        };
        let mut extra = Map::new();
        extra.insert("sandbox".to_string(), Value::from(walls));
        shell(args, &options, extra)
    }

    fn walls(&self) -> Vec<String> {
        let mut walls = vec![if self.settings.file_walls {
            format!("shell: {BOXED}")
        } else {
            format!("shell: {UNBOXED}")
        }];
        if !self.read_only.is_empty() {
            let folders: Vec<String> = self
                .read_only
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            walls.push(format!(
                "shell: read-only in every box: {}",
                folders.join(", ")
            ));
        }
        walls.extend(
            self.direct
                .walls()
                .into_iter()
                .filter(|w| !w.starts_with("shell:") && !w.starts_with("no sandbox yet")),
        );
        walls.push(
            "read_file, write_file, http_fetch, consult: in the broker's process, outside the box"
                .to_string(),
        );
        walls
    }
}
