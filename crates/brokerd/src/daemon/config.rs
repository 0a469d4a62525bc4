//! `brokerd.toml`: every key optional, every duration in milliseconds (so tests run in
//! seconds), unknown keys refused with their name.
//!
//! ```toml
//! read_file_ms = 10000        # each tool's time limit (seed M6b/04's time_limit)
//! write_file_ms = 10000
//! shell_ms = 60000
//! http_fetch_ms = 30000
//! web_search_ms = 30000       # the whole search, retries included
//! consult_ms = 120000         # its own limit: a local model needs more than read_file_ms
//! memory_ms = 10000           # recall, memory, ask_memory
//! git_ms = 30000              # git_status and git_diff, every git of a call together
//! git_clone_ms = 300000       # git_clone, the host check included
//! git_clone_mb = 1024         # the most a clone may write; git is stopped past it
//! job_lifetime_ms = 3600000   # a bash_bg job is killed after this long
//! jobs_per_session = 8        # jobs a session keeps (running ones refuse one more)
//! job_ring_bytes = 1048576    # the newest bytes of output a job keeps
//! result_cap = 32768          # bytes of a rendered answer
//! idle_timeout_ms = 60000     # a client silent mid-frame or never reading is closed
//! connection_idle_ms = 600000 # a connection idle after hello, no call waiting, is closed
//!                             #   (its client reconnects and resumes the session)
//! agent_connections = 2048    # open connections agent.sock takes; the next gets an error
//! owner_connections = 2048    # the same for owner.sock (both are held under the open-file
//!                             #   limit, which brokerd raises to its hard limit at start)
//! session_idle_days = 30      # a session unused this long ends (or session_idle_ms)
//! approval_ms = 300000        # a pending approval or question lapses after this long
//! pending_grace_ms = 60000    # a waiting call whose client left is abandoned after this long
//! protected = ["/srv/keys"]   # more folders no tool may name
//! [consult]                   # the model `consult` asks (optional)
//! url = "http://127.0.0.1:8081/v1"
//! [web_search]                # the provider `web_search` asks (optional; see daemon::search)
//! provider = "searxng"
//! url = "http://127.0.0.1:8888"
//! [sandbox]                   # the box each `shell` call runs in
//! read_only = ["~/.cargo", "~/.rustup"]  # toolchain folders bound read-only
//! file_walls = true           # false: run `shell` without the box (every header says so)
//! bubblewrap = true           # false: boxes of Landlock, seccomp, rlimits and a cgroup alone,
//!                             #   as where bubblewrap or user namespaces are missing
//! tmp_mb = 64                 # the box's private /tmp
//! processes = 256             # processes in one box
//! memory_mb = 2048            # memory of one box
//! warm_idle_ms = 60000        # a session's warm file-tool box ends after this long unused;
//!                             #   0: a fresh box for every file call
//! podman_image = "localhost/tools:1"  # optional: `shell` in a Podman container of this image
//! [audit]                     # the log's checkpoints (see daemon::sealing)
//! seal_interval_secs = 600    # how often it is sealed and sent to the witness
//! witness = "unix:/run/w/witness.sock"  # a `bx audit witness` (optional)
//! witness_wait_ms = 5000      # the longest an exchange with the witness may take
//! [[diagnostics]]            # a checker run after a write (see daemon::diagnostics)
//! workspace = "~/src/app"     # files under it with one of its extensions
//! extensions = ["py"]
//! command = ["python3", "/opt/check.py", "{file}"]
//! runs_project_code = false   # true: only as a `shell` call a shell grant covers
//! format = "gcc"              # "json-cargo", "gcc" or "lines"
//! timeout_ms = 10000
//! max = 20                    # the most diagnostics appended
//! [mcp]
//! approve_in_client = ["claude-code"]  # MCP clients that may answer approvals themselves
//! [[mcp.servers]]             # a downstream MCP server behind the gateway (see daemon::gateway)
//! name = "git"                # its tools are git.<tool>; grants name them so
//! command = ["/opt/mcp-git/bin/mcp-server-git"]  # program (absolute) and arguments
//! read_only = ["/opt/mcp-git"]  # folders its program needs, bound read-only in its box
//! env = { LANG = "C.UTF-8" }  # its environment beside the box's own
//! shared = false              # true: one instance for every session (results then carry the
//!                             #   highest class it has received)
//! # or, for a server that runs elsewhere (not boxed): url = "https://mcp.example/mcp"
//! #   with token_file = "~/.config/boxmaker/example-token" (its bearer token)
//! call_ms = 30000             # each call's time limit
//! start_ms = 20000            # how long it may take to start and list its tools
//! idle_ms = 600000            # an instance unused this long is ended (started again on use)
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::consult::Consult;
use policy::args::ToolName;
use proto::tools::TimeLimit;

/// The broker's settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `read_file`'s time limit.
    pub read_file_ms: u64,
    /// `write_file`'s time limit.
    pub write_file_ms: u64,
    /// `shell`'s time limit.
    pub shell_ms: u64,
    /// `http_fetch`'s time limit.
    pub http_fetch_ms: u64,
    /// `web_search`'s time limit, retries included.
    pub web_search_ms: u64,
    /// `consult`'s time limit.
    pub consult_ms: u64,
    /// The memory tools' time limit.
    pub memory_ms: u64,
    /// `git_status`'s and `git_diff`'s time limit.
    pub git_ms: u64,
    /// `git_clone`'s time limit.
    pub git_clone_ms: u64,
    /// The most mebibytes a `git_clone` may write.
    pub git_clone_mb: u64,
    /// How long a `bash_bg` job may run before it is killed (the issue's `job_lifetime`).
    pub job_lifetime_ms: u64,
    /// How many jobs a session keeps at once: starting one more drops the oldest that has
    /// ended, and is refused when every one still runs.
    pub jobs_per_session: usize,
    /// The newest bytes of output each job keeps for `bash_tail`.
    pub job_ring_bytes: usize,
    /// The most bytes of a rendered answer.
    pub result_cap: usize,
    /// How long a connection may stay silent in the middle of a frame or not read an answer.
    pub idle_timeout_ms: u64,
    /// How many days a session may go unused before it ends.
    pub session_idle_days: u64,
    /// The same in milliseconds; when set it wins over `session_idle_days` (for tests).
    pub session_idle_ms: Option<u64>,
    /// How long a connection may stay idle after its hello (agent socket: no call waiting;
    /// owner socket: between requests, a watch stream aside) before the broker closes it. The
    /// session is not ended: loopd and `bx mcp` reconnect and resume it on their next call.
    pub connection_idle_ms: u64,
    /// The most connections `agent.sock` holds open at once; the next is sent a
    /// `too_many_connections` error and closed.
    pub agent_connections: usize,
    /// The most connections `owner.sock` holds open at once.
    pub owner_connections: usize,
    /// How long a pending approval or `ask` question waits for the owner.
    pub approval_ms: u64,
    /// How long a waiting call whose client has left is kept for the client to resume before
    /// it is abandoned (never run).
    pub pending_grace_ms: u64,
    /// Folders no tool may name, beside boxmaker's own.
    pub protected: Vec<PathBuf>,
    /// The model `consult` asks.
    pub consult: Option<Consult>,
    /// The provider `web_search` asks.
    pub web_search: Option<super::search::WebSearchConfig>,
    /// The box commands run in.
    pub sandbox: SandboxConfig,
    /// What MCP clients served by `bx mcp` may do.
    pub mcp: McpConfig,
    /// How the audit log is checkpointed: sealed, sent to a witness.
    pub audit: super::sealing::AuditConfig,
    /// Where the ledger is: the state folder's SQLite file, or a PostgreSQL database.
    pub ledger: super::ledger_settings::LedgerConfig,
    /// The checkers run after a write, per workspace (none by default).
    pub diagnostics: Vec<super::diagnostics::DiagnosticsConfig>,
}

/// `[mcp]`: what the MCP clients `bx mcp` serves may do beside calling tools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// The client names (as each MCP client names itself) whose own interface may answer the
    /// approvals and `ask` questions of their session's calls (MCP elicitation). Empty by
    /// default: answering from the agent's own client gives the agent's side owner power,
    /// and some clients accept every elicitation unasked. Each answer is recorded with the
    /// client as its channel.
    pub approve_in_client: Vec<String>,
    /// The downstream MCP servers whose tools the gateway serves, each behind the grants.
    pub servers: Vec<DownstreamConfig>,
}

/// `[[mcp.servers]]`: one downstream MCP server, started on demand in a box.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamConfig {
    /// Its name: its tools are `name.tool` (see `policy::downstream::valid_server_name`).
    pub name: String,
    /// The program (an absolute path) and its arguments, for a server the broker starts.
    #[serde(default)]
    pub command: Vec<String>,
    /// The streamable-HTTP endpoint (`http://` or `https://`) of a server that runs elsewhere,
    /// instead of `command`: not boxed, reached directly.
    pub url: Option<String>,
    /// A file whose first line is the bearer token sent to `url` (`~/` is the owner's home).
    pub token_file: Option<PathBuf>,
    /// Folders its program needs, bound read-only in its box (`~/` is the owner's home).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Its environment beside the box's own (`PATH`, `HOME`, `LANG`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Whether one instance serves every session (by default each session has its own).
    #[serde(default)]
    pub shared: bool,
    /// Each call's time limit, in milliseconds; past it the instance is ended and restarted.
    #[serde(default = "default_call_ms")]
    pub call_ms: u64,
    /// How long it may take to start and list its tools, in milliseconds.
    #[serde(default = "default_start_ms")]
    pub start_ms: u64,
    /// How long an instance may stay unused before it is ended, in milliseconds (the next call
    /// starts it again).
    #[serde(default = "default_idle_ms")]
    pub idle_ms: u64,
}

fn default_idle_ms() -> u64 {
    600_000
}

fn default_call_ms() -> u64 {
    30_000
}

fn default_start_ms() -> u64 {
    20_000
}

/// `[sandbox]`: the box `shell` runs in.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Folders bound read-only in every box beside the minimal system (toolchains); `~/`
    /// is the owner's home.
    pub read_only: Vec<PathBuf>,
    /// Whether `shell` runs in the box (the default). `false` is the explicit switch to run
    /// it without file walls, named in every result's header.
    pub file_walls: bool,
    /// Whether boxes use bubblewrap where it works (the default). `false` builds them of
    /// Landlock, seccomp, rlimits and the cgroup alone, as on a machine without bubblewrap or
    /// user namespaces (every header says so).
    pub bubblewrap: bool,
    /// The size of the box's private `/tmp`, in MiB.
    pub tmp_mb: u64,
    /// The most processes in one box.
    pub processes: u64,
    /// The most memory of one box, in MiB.
    pub memory_mb: u64,
    /// How long a session's warm box for the file tools waits unused before it is ended, in
    /// milliseconds; 0 builds a fresh box for every file call (see `daemon::warm`).
    pub warm_idle_ms: u64,
    /// An image (as Podman names it, e.g. `localhost/tools:1`): `shell` commands then run in a
    /// fresh Podman container of it (see `daemon::podman`); unset: in the box.
    pub podman_image: Option<String>,
    /// The `podman` program (default: the first on the usual paths).
    pub podman: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            read_only: Vec::new(),
            file_walls: true,
            bubblewrap: true,
            tmp_mb: 64,
            processes: 256,
            memory_mb: 2048,
            warm_idle_ms: 60_000,
            podman_image: None,
            podman: None,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            read_file_ms: 10_000,
            write_file_ms: 10_000,
            shell_ms: 60_000,
            http_fetch_ms: 30_000,
            web_search_ms: 30_000,
            consult_ms: 120_000,
            memory_ms: 10_000,
            git_ms: 30_000,
            git_clone_ms: 300_000,
            git_clone_mb: 1024,
            job_lifetime_ms: 3_600_000,
            jobs_per_session: 8,
            job_ring_bytes: 1 << 20,
            result_cap: 32 * 1024,
            idle_timeout_ms: 60_000,
            connection_idle_ms: 600_000,
            agent_connections: 2048,
            owner_connections: 2048,
            session_idle_days: 30,
            session_idle_ms: None,
            approval_ms: 300_000,
            pending_grace_ms: 60_000,
            protected: Vec::new(),
            consult: None,
            web_search: None,
            sandbox: SandboxConfig::default(),
            mcp: McpConfig::default(),
            audit: super::sealing::AuditConfig::default(),
            ledger: Default::default(),
            diagnostics: Vec::new(),
        }
    }
}

impl Config {
    /// Reads `path`; a missing file means every default.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut config: Config =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        super::diagnostics::check(&mut config.diagnostics, home.as_deref())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        config
            .ledger
            .postgres()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if config.result_cap < 1024 {
            return Err(format!(
                "{}: result_cap is {}; it must be at least 1024 bytes",
                path.display(),
                config.result_cap
            ));
        }
        if config.jobs_per_session == 0 || config.job_ring_bytes < 1024 {
            return Err(format!(
                "{}: jobs_per_session must be at least 1 and job_ring_bytes at least 1024 (they are {} and {})",
                path.display(),
                config.jobs_per_session,
                config.job_ring_bytes
            ));
        }
        if config.connection_idle_ms == 0
            || config.agent_connections == 0
            || config.owner_connections == 0
        {
            return Err(format!(
                "{}: connection_idle_ms, agent_connections and owner_connections must be more than 0 (they are {}, {} and {})",
                path.display(),
                config.connection_idle_ms,
                config.agent_connections,
                config.owner_connections
            ));
        }
        if let Some(bad) = config.protected.iter().find(|p| !p.is_absolute()) {
            return Err(format!(
                "{}: protected folder {} must be an absolute path",
                path.display(),
                bad.display()
            ));
        }
        if let Some(bad) = config
            .sandbox
            .read_only
            .iter()
            .find(|p| !p.is_absolute() && !p.starts_with("~"))
        {
            return Err(format!(
                "{}: [sandbox] read_only folder {} must be an absolute path or start with ~/",
                path.display(),
                bad.display()
            ));
        }
        check_servers(&config.mcp.servers).map_err(|e| format!("{}: {e}", path.display()))?;
        config
            .audit
            .check()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(config)
    }

    /// How long a session may go unused before it ends.
    pub fn session_idle(&self) -> Duration {
        match self.session_idle_ms {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs(self.session_idle_days.saturating_mul(86_400)),
        }
    }

    /// The time limit of `tool`: the configured limit of its bucket (`proto::tools`' table).
    pub fn time_limit(&self, tool: ToolName) -> Duration {
        let ms = match tool.facts().time_limit {
            // The walkers read like read_file; edit_file writes like write_file.
            TimeLimit::ReadFile => self.read_file_ms,
            TimeLimit::WriteFile => self.write_file_ms,
            // Starting, reading and killing a job are quick; the job itself lives up to
            // `job_lifetime_ms`.
            TimeLimit::Shell => self.shell_ms,
            TimeLimit::HttpFetch => self.http_fetch_ms,
            TimeLimit::WebSearch => self.web_search_ms,
            TimeLimit::Consult => self.consult_ms,
            TimeLimit::Memory => self.memory_ms,
            TimeLimit::Approval => self.approval_ms,
            TimeLimit::Git => self.git_ms,
            TimeLimit::GitClone => self.git_clone_ms,
            // No built-in tool's: a downstream server's tools have its own `call_ms`.
            TimeLimit::Downstream => default_call_ms(),
        };
        Duration::from_millis(ms)
    }

    /// How long a background job may run.
    pub fn job_lifetime(&self) -> Duration {
        Duration::from_millis(self.job_lifetime_ms)
    }

    /// How long an approval waits.
    pub fn approval_wait(&self) -> Duration {
        Duration::from_millis(self.approval_ms)
    }

    /// The grace period of a waiting call whose client left.
    pub fn pending_grace(&self) -> Duration {
        Duration::from_millis(self.pending_grace_ms)
    }

    /// The idle timeout of a connection.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// How long a connection may wait idle for its next frame after its hello.
    pub fn connection_idle(&self) -> Duration {
        Duration::from_millis(self.connection_idle_ms)
    }
}

/// `path` with a leading `~` meaning `home`, as `brokerd.toml` writes the owner's home.
pub fn expand_home(path: &Path, home: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => home.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// Each downstream server's name is valid and its own, and its program an absolute path.
fn check_servers(servers: &[DownstreamConfig]) -> Result<(), String> {
    for (i, server) in servers.iter().enumerate() {
        let name = &server.name;
        if !policy::downstream::valid_server_name(name) {
            return Err(format!(
                "[[mcp.servers]] name {name:?} must be 1 to {} lower-case letters, digits, '-' or '_', starting with a letter",
                policy::downstream::MAX_SERVER_NAME
            ));
        }
        if servers
            .get(..i)
            .is_some_and(|s| s.iter().any(|o| &o.name == name))
        {
            return Err(format!("[[mcp.servers]] name {name:?} is used twice"));
        }
        match (server.command.first(), &server.url) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "[[mcp.servers]] {name}: give command or url, not both"
                ));
            }
            (None, Some(url)) if url.starts_with("https://") || url.starts_with("http://") => {}
            (None, Some(url)) => {
                return Err(format!(
                    "[[mcp.servers]] {name}: url {url:?} must start with https:// or http://"
                ));
            }
            (Some(program), None) if Path::new(program).is_absolute() => {}
            (Some(program), None) => {
                return Err(format!(
                    "[[mcp.servers]] {name}: the program {program:?} must be an absolute path"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "[[mcp.servers]] {name}: command must name a program (or url an HTTP server)"
                ));
            }
        }
        if server.token_file.is_some() && server.url.is_none() {
            return Err(format!(
                "[[mcp.servers]] {name}: token_file is for a server reached by url"
            ));
        }
        if let Some(bad) = server
            .read_only
            .iter()
            .find(|p| !p.is_absolute() && !p.starts_with("~"))
        {
            return Err(format!(
                "[[mcp.servers]] {name}: read_only folder {} must be an absolute path or start with ~/",
                bad.display()
            ));
        }
        if server.call_ms == 0 || server.start_ms == 0 || server.idle_ms == 0 {
            return Err(format!(
                "[[mcp.servers]] {name}: call_ms, start_ms and idle_ms must be more than 0"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_optional_and_unknown_keys_are_named() {
        assert_eq!(toml::from_str::<Config>("").ok(), Some(Config::default()));
        let config: Config = toml::from_str("shell_ms = 50\nresult_cap = 2048\n").unwrap();
        assert_eq!(
            config.time_limit(ToolName::Shell),
            Duration::from_millis(50)
        );
        assert_eq!(config.result_cap, 2048);
        let error = toml::from_str::<Config>("shel_ms = 5")
            .unwrap_err()
            .to_string();
        assert!(error.contains("shel_ms"), "{error}");
    }

    #[test]
    fn downstream_servers_are_checked_by_name() {
        let config: Config = toml::from_str(
            "[[mcp.servers]]\nname = \"git\"\ncommand = [\"/usr/bin/mcp-git\", \"-v\"]\n",
        )
        .unwrap();
        let git = &config.mcp.servers[0];
        assert_eq!(
            (git.call_ms, git.start_ms, git.shared),
            (30_000, 20_000, false)
        );
        assert!(check_servers(&config.mcp.servers).is_ok());
        let bad = |text: &str| {
            let config: Config = toml::from_str(text).unwrap();
            check_servers(&config.mcp.servers).unwrap_err()
        };
        let relative = bad("[[mcp.servers]]\nname = \"git\"\ncommand = [\"mcp-git\"]\n");
        assert!(relative.contains("absolute"), "{relative}");
        let named = bad("[[mcp.servers]]\nname = \"Git\"\ncommand = [\"/x\"]\n");
        assert!(named.contains("\"Git\""), "{named}");
        let twice = bad(
            "[[mcp.servers]]\nname = \"a\"\ncommand = [\"/x\"]\n[[mcp.servers]]\nname = \"a\"\ncommand = [\"/y\"]\n",
        );
        assert!(twice.contains("twice"), "{twice}");
        let empty = bad("[[mcp.servers]]\nname = \"a\"\ncommand = []\n");
        assert!(empty.contains("program"), "{empty}");
        let both = bad("[[mcp.servers]]\nname = \"a\"\ncommand = [\"/x\"]\nurl = \"http://x\"\n");
        assert!(both.contains("not both"), "{both}");
        let scheme = bad("[[mcp.servers]]\nname = \"a\"\nurl = \"ftp://x\"\n");
        assert!(scheme.contains("https://"), "{scheme}");
        let token = bad("[[mcp.servers]]\nname = \"a\"\ncommand = [\"/x\"]\ntoken_file = \"/t\"\n");
        assert!(token.contains("token_file"), "{token}");
        let url: Config =
            toml::from_str("[[mcp.servers]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\n")
                .unwrap();
        assert!(check_servers(&url.mcp.servers).is_ok());
        let error =
            toml::from_str::<Config>("[[mcp.servers]]\nname = \"a\"\nurls = \"http://x\"\n")
                .unwrap_err()
                .to_string();
        assert!(error.contains("urls"), "{error}");
    }

    #[test]
    fn the_sandbox_is_on_unless_file_walls_is_switched_off() {
        assert!(Config::default().sandbox.file_walls);
        let config: Config =
            toml::from_str("[sandbox]\nread_only = [\"~/.cargo\"]\nfile_walls = false\n").unwrap();
        assert!(!config.sandbox.file_walls);
        assert_eq!(config.sandbox.read_only, [PathBuf::from("~/.cargo")]);
        let error = toml::from_str::<Config>("[sandbox]\nwalls = false")
            .unwrap_err()
            .to_string();
        assert!(error.contains("walls"), "{error}");
    }
}
