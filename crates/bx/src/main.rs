//! `bx`, the owner's command line over the broker's owner socket: pending approvals and
//! questions, the owner's answers, the live stream, grant files, the audit log, status, and
//! `bx demo`.
//!
//! Exit status: 0 done, 1 refused or failed, 2 bad usage, 3 no broker running.

mod audit;
mod check_json;
mod commands;
mod console;
mod demo;
mod doctor;
mod downstream;
mod grant_text;
mod grants;
mod mcp_serve;
mod memory;
mod owner;
mod pin;
mod pin_edit;
mod show;
mod watch;
mod witness;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// The exit statuses `bx --help` documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done.
    Done,
    /// 1: refused or failed.
    Failed,
    /// 2: bad usage.
    Usage,
    /// 3: no broker running.
    NoBroker,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(match exit {
            Exit::Done => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::NoBroker => 3,
        })
    }
}

const AFTER_HELP: &str = "\
Examples:
  bx demo                                   # the whole thing in one command, nothing to set up
  bx approvals                              # what waits for you: tool, full arguments, grant, why
  bx approve 3                              # let call 3 run once
  bx approve 3 --session                    # and every call its grant asks about, this session
  bx refuse 3
  bx answer 4 \"yes, deploy to staging\"      # answer the model's question 4
  bx watch                                  # the live stream; at a terminal it asks you too
  bx console                                # the same in a browser: prints a one-time address
  bx grants preset coding --workspace ~/src/app && bx grants check
  bx grants pin 'git.*'                     # show a downstream server's tools, then pin them
  bx audit verify
  bx audit checkpoint > ~/cp && bx audit verify --checkpoint ~/cp   # later: nothing before it rewritten
  bx audit prove 12 --size 40 > p && bx audit verify --checkpoint ~/cp --proof p
  bx audit consistency 40 > q               # the log now extends the tree of its first 40 records
  bx memory list                            # what sessions remembered, with each entry's labels
  bx mcp --session claude-code              # an MCP client's tools, gated (see README: MCP)
  bx memory forget 12 && bx memory purge

Owner power rests on the uid: any program running as your user that can run code can reach the
owner socket and answer approvals. That is why no grant set offers `shell` until the sandbox
keeps the owner socket out of every box.

Folders (flag, variable, default), the same as brokerd's:
  config   --config-dir   BOXMAKER_CONFIG_DIR   $XDG_CONFIG_HOME/boxmaker
  state    --state-dir    BOXMAKER_STATE_DIR    $XDG_STATE_HOME/boxmaker
  runtime  --runtime-dir  BOXMAKER_RUNTIME_DIR  $XDG_RUNTIME_DIR/boxmaker, else /tmp/boxmaker-<uid>
With no runtime flag or variable and no broker there, bx uses the folder the running broker
recorded in the config folder (brokerd.runtime): an MCP client's launcher may drop XDG_RUNTIME_DIR.

Exit status: 0 done, 1 refused or failed, 2 bad usage, 3 no broker running.";

#[derive(Parser)]
#[command(
    name = "bx",
    version = concat!(env!("CARGO_PKG_VERSION"), " (build ", env!("BOXMAKER_BUILD_ID"), ")"),
    about = "boxmaker's owner command line: answer the calls your agent's grants ask about, watch every call, check grants and the audit log",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(flatten)]
    folders: Folders,
    #[command(subcommand)]
    command: Command,
}

/// The three folders, as brokerd takes them.
#[derive(Args, Clone, Default)]
pub struct Folders {
    /// The config folder (brokerd.toml, grants/).
    #[arg(long, value_name = "DIR", global = true)]
    pub config_dir: Option<PathBuf>,
    /// The state folder (ledger, audit log).
    #[arg(long, value_name = "DIR", global = true)]
    pub state_dir: Option<PathBuf>,
    /// The runtime folder (owner.sock).
    #[arg(long, value_name = "DIR", global = true)]
    pub runtime_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// List the calls and questions waiting for you: id, tool, full arguments, session, grant,
    /// why, expiry.
    Approvals {
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Let a waiting call run (e.g. `bx approve 3`).
    Approve {
        /// The approval's id, from `bx approvals`.
        id: u64,
        /// Also approve, for the rest of that session, every call its grant asks about.
        #[arg(long)]
        session: bool,
    },
    /// Refuse a waiting call: the agent gets ApprovalRefused.
    Refuse {
        /// The approval's id.
        id: u64,
    },
    /// Answer a question the model asked with `ask` (e.g. `bx answer 4 "staging only"`).
    Answer {
        /// The question's id.
        id: u64,
        /// Your answer, given to the model as the result of its `ask`.
        text: String,
    },
    /// Watch every call as it happens; at a terminal, answer each approval and question as it
    /// comes (once / for the session / refuse).
    Watch {
        /// One JSON event per line (and no questions asked).
        #[arg(long)]
        json: bool,
    },
    /// The grant files.
    Grants {
        #[command(subcommand)]
        command: GrantsCommand,
    },
    /// The audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The memory behind recall, memory and ask_memory: every entry with the labels of the
    /// session that wrote it. Each command is recorded in the audit log.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// The running broker: sockets, sessions, pending approvals, grants or their problems, and
    /// the walls around each tool run.
    Status {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// What this machine offers the box (bubblewrap, user namespaces, seccomp, the cgroup
    /// controllers, Landlock, a real box), what each missing wall means, and the toolchains
    /// found. Works with no broker running; exit 1 when a wall is missing.
    Doctor,
    /// Serve the broker's gated tools to an MCP client (Claude Code, Codex, Goose, …) over
    /// standard input and output: every call is decided by your grants, may wait for your
    /// approval, runs in the box and is audited.
    Mcp(mcp_serve::McpArgs),
    /// Serve the owner's console on a loopback port: the waiting approvals and questions,
    /// live, answered with a click. Prints a one-time login address.
    Console(console::ConsoleArgs),
    /// Run the demo: a real broker and agent on a temporary folder, each kind of decision shown
    /// and explained, then the audit log verified. Nothing is left behind.
    Demo(demo::DemoArgs),
}

#[derive(Subcommand)]
enum GrantsCommand {
    /// Check every grant file: problems and warnings with file and line; with the broker
    /// running, every downstream tool against the grants (pinned, unpinned, changed, denied).
    /// Exit 1 on a problem or a downstream tool unpinned or changed. Works with no broker.
    Check {
        /// One JSON object (field names in docs/GRANTS.md).
        #[arg(long)]
        json: bool,
    },
    /// Pin downstream tools (`git.git_status`, or a glob like `git.*`): show each one's
    /// definition as its server lists it now, then write its pin into the grants that name it,
    /// in place. Needs the broker running.
    Pin {
        /// The tools, `server.tool` or a glob; `server.tool@HASH` (8 or more digits) picks one
        /// definition where the server's instances list several.
        #[arg(required = true, value_name = "TOOL")]
        tools: Vec<String>,
    },
    /// Write a commented starting set of grants (refuses to overwrite).
    Preset {
        #[command(subcommand)]
        preset: Preset,
    },
}

#[derive(Subcommand)]
enum Preset {
    /// Coding in one folder: read it (untrusted, the default), write in it, and ask before
    /// http_fetch and consult. No shell until the sandbox exists.
    Coding {
        /// The workspace folder.
        #[arg(long, value_name = "DIR")]
        workspace: PathBuf,
    },
}

#[derive(Subcommand)]
enum MemoryCommand {
    /// The newest entries, forgotten ones marked (they stay until `bx memory purge`).
    List {
        /// The most entries to list.
        #[arg(long, default_value_t = 50)]
        limit: u64,
        /// One JSON array.
        #[arg(long)]
        json: bool,
    },
    /// One entry, whole.
    Show {
        /// The entry's id.
        id: u64,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Forget an entry: no session recalls it again; it is listed until `bx memory purge`.
    Forget {
        /// The entry's id.
        id: u64,
    },
    /// Delete every forgotten entry for good.
    Purge,
    /// Every entry with its labels (class, untrusted), one JSON line each, to standard output.
    Export,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check the audit log's hash chain: exit 0 with a summary, or 1 naming the first broken
    /// record; with --checkpoint, also that the log's first records still hash to that
    /// checkpoint's root; with --proof, that the proof holds; with --witness DIR, the log
    /// against what a witness cosigned, naming the first record that no longer matches; with
    /// --witness or --seal-root, what each of the broker's stops reads as (logging off, a
    /// crash and its window). Works with no broker running.
    Verify(audit::VerifyArgs),
    /// Print the log's checkpoint: a text naming the log (origin), its size and its Merkle
    /// root (RFC 9162, base64). Keep it somewhere the agent cannot write.
    Checkpoint {
        /// The checkpoint of the log's first N records instead of all of them.
        #[arg(long, value_name = "N")]
        size: Option<u64>,
    },
    /// Print the inclusion proof of record RECORD in the tree of the whole log (or of its first
    /// N records).
    Prove {
        /// The record's number (`seq`).
        record: u64,
        /// The tree's size: the log's first N records.
        #[arg(long, value_name = "N")]
        size: Option<u64>,
    },
    /// Print the consistency proof that the tree of the log's first OLD records is a prefix of
    /// the tree of its first NEW (the whole log when NEW is left out).
    Consistency {
        /// The older size.
        old: u64,
        /// The newer size.
        new: Option<u64>,
    },
    /// Run a witness: keep in DIR the checkpoints it cosigns and their records' leaf hashes,
    /// receive checkpoints on the unix socket PATH, cosign each one consistent with the last
    /// it cosigned for that log (a consistency proof), or refuse it saying why.
    Witness(witness::WitnessArgs),
    /// Send the log's checkpoint to a witness now (as the broker does at each seal) and keep
    /// its cosignature in the state folder's `witness/`.
    Cosign {
        /// The witness: unix:PATH, the socket of a `bx audit witness`.
        #[arg(long, value_name = "unix:PATH")]
        witness: String,
    },
    /// Forward-secure seals on checkpoints (the state folder's `seal/`).
    Seal {
        #[command(subcommand)]
        command: SealCommand,
    },
}

#[derive(Subcommand)]
enum SealCommand {
    /// Set up sealing: epoch 1's key in the state folder's `seal/`, and print the root public
    /// key, once. Keep it off this machine: `bx audit verify --seal-root KEY` needs it.
    Init,
    /// Seal the log's checkpoint now with the current epoch's key, then move to the next
    /// epoch (the key that sealed is replaced).
    Now,
}

fn main() -> ExitCode {
    // `bx doctor` builds a real box launched through this binary (the Landlock layer).
    let cli = match sandbox::launch_if_asked() {
        Some(args) => Cli::parse_from(args),
        None => Cli::parse(),
    };
    let uid = rustix::process::getuid().as_raw();
    let env = |name: &str| std::env::var_os(name);
    let dirs = proto::dirs::Dirs::resolve(
        cli.folders.config_dir.as_deref(),
        cli.folders.state_dir.as_deref(),
        cli.folders.runtime_dir.as_deref(),
        &env,
        uid,
    )
    .and_then(|dirs| {
        // Where the default finds no socket, the folder the running broker recorded.
        let runtime = proto::rendezvous::runtime_for_client(
            cli.folders.runtime_dir.as_deref(),
            Some(&dirs.config),
            &env,
            uid,
        )?;
        Ok(proto::dirs::Dirs { runtime, ..dirs })
    });
    let dirs = match dirs {
        Ok(dirs) => dirs,
        Err(e) => {
            eprintln!("bx: {e}");
            return Exit::Usage.into();
        }
    };
    let exit = match cli.command {
        Command::Approvals { json } => commands::approvals(&dirs, json),
        Command::Approve { id, session } => commands::approve(&dirs, id, session),
        Command::Refuse { id } => commands::refuse(&dirs, id),
        Command::Answer { id, text } => commands::answer(&dirs, id, text),
        Command::Watch { json } => watch::watch(&dirs, json),
        Command::Grants {
            command: GrantsCommand::Check { json },
        } => grants::check(&dirs, json),
        Command::Grants {
            command: GrantsCommand::Pin { tools },
        } => pin::pin(&dirs, &tools),
        Command::Grants {
            command:
                GrantsCommand::Preset {
                    preset: Preset::Coding { workspace },
                },
        } => grants::preset_coding(&dirs, &workspace),
        Command::Audit { command } => match command {
            AuditCommand::Verify(args) => audit::verify(&dirs, &args),
            AuditCommand::Checkpoint { size } => audit::checkpoint(&dirs, size),
            AuditCommand::Prove { record, size } => audit::prove(&dirs, record, size),
            AuditCommand::Consistency { old, new } => audit::consistency(&dirs, old, new),
            AuditCommand::Witness(args) => witness::serve(&args),
            AuditCommand::Cosign { witness } => witness::cosign(&dirs, &witness),
            AuditCommand::Seal {
                command: SealCommand::Init,
            } => audit::seal_init(&dirs),
            AuditCommand::Seal {
                command: SealCommand::Now,
            } => audit::seal_now(&dirs),
        },
        Command::Status { json } => commands::status(&dirs, json),
        Command::Memory { command } => match command {
            MemoryCommand::List { limit, json } => memory::list(&dirs, limit, json),
            MemoryCommand::Show { id, json } => memory::show(&dirs, id, json),
            MemoryCommand::Forget { id } => memory::forget(&dirs, id),
            MemoryCommand::Purge => memory::purge(&dirs),
            MemoryCommand::Export => memory::export(&dirs),
        },
        Command::Doctor => doctor::doctor(),
        Command::Demo(args) => demo::run(&args),
        Command::Mcp(args) => mcp_serve::run(&dirs, &args),
        Command::Console(args) => console::run(&dirs, &args),
    };
    exit.into()
}
