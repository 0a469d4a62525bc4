//! `brokerd`: the broker daemon (`brokerd serve`, the default) and `brokerd audit verify`.
//!
//! Exit status: 0 done; 1 refused or failed (a broken audit log, another broker running, bad
//! settings); 2 bad usage.

use std::path::PathBuf;
use std::process::ExitCode;

/// The broker and the workers in its boxes (this binary; `brokerd-files`) allocate with
/// mimalloc: the walkers of grep, glob and list_files make a few small paths per file, and on
/// the kernel tree the system allocator cost them 10-15 % (the bench of `tools` uses the same).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "brokerd",
    version = brokerd::BUILD_VERSION,
    about = "boxmaker's broker: decides every tool call against the owner's grants, runs it, and records it in a hash-chained audit log",
    after_help = "Folders (flag, variable, default):\n  config   --config-dir   BOXMAKER_CONFIG_DIR   $XDG_CONFIG_HOME/boxmaker (brokerd.toml, grants/)\n  state    --state-dir    BOXMAKER_STATE_DIR    $XDG_STATE_HOME/boxmaker (ledger, audit log, sessions/)\n  runtime  --runtime-dir  BOXMAKER_RUNTIME_DIR  $XDG_RUNTIME_DIR/boxmaker, else /tmp/boxmaker-<uid> (agent.sock, owner.sock)\n\nExit status: 0 done, 1 refused or failed, 2 bad usage."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the agent and owner sockets (the default).
    Serve(ServeArgs),
    /// The audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The file tools' worker, run by the broker inside a box: reads its request from the
    /// box's /tmp/boxmaker-request.json and prints the outcome.
    #[command(hide = true)]
    BoxFile {
        /// Stay up as a session's warm worker: one request per line on standard input, one
        /// answer line for each on standard output.
        #[arg(long)]
        warm: bool,
    },
    /// http_fetch's worker, run by the broker inside a box whose only way out is the broker's
    /// proxy: reads its request from the box's /tmp/boxmaker-fetch.json and prints the outcome.
    #[command(hide = true)]
    BoxFetch {
        /// Stay up as a session's warm fetcher: one request per line on standard input, one
        /// answer line for each on standard output.
        #[arg(long)]
        warm: bool,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check the audit log's hash chain: exit 0 with a summary, or 1 naming the first broken
    /// record. While a broker runs, the check reaches the ledger's last recorded record.
    Verify {
        /// The state folder holding the log and the ledger.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
}

#[derive(Args, Clone, Default)]
struct ServeArgs {
    /// The config folder (brokerd.toml, grants/).
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
    /// The state folder (ledger, audit log, loopd's sessions/).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The runtime folder (agent.sock, owner.sock); it must be yours with mode 0700.
    #[arg(long, value_name = "DIR")]
    runtime_dir: Option<PathBuf>,
    /// If the audit log is broken, keep it aside and start a new segment that records the
    /// break (instead of refusing to start).
    #[arg(long)]
    new_audit_segment: bool,
}

fn main() -> ExitCode {
    // In a box, brokerd's binary is first the box's launcher (Landlock, then the command); for
    // `brokerd box-file` it goes on in the same process with the box's arguments.
    let cli = match sandbox::launch_if_asked() {
        Some(args) => Cli::parse_from(args),
        None => Cli::parse(),
    };
    match cli.command {
        Some(Command::Audit {
            command: AuditCommand::Verify { state_dir },
        }) => audit_verify(state_dir),
        Some(Command::Serve(args)) => serve(args),
        Some(Command::BoxFile { warm }) => worker_exit(
            "box-file",
            if warm {
                brokerd::daemon::worker::serve_warm()
            } else {
                brokerd::daemon::worker::serve()
            },
        ),
        Some(Command::BoxFetch { warm }) => worker_exit(
            "box-fetch",
            if warm {
                brokerd::daemon::fetch::serve_warm()
            } else {
                brokerd::daemon::fetch::serve()
            },
        ),
        None => serve(cli.serve),
    }
}

/// How a worker mode of brokerd (in a box) ends: success, or its error on standard error.
fn worker_exit(mode: &str, ended: Result<(), String>) -> ExitCode {
    match ended {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("brokerd {mode}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    // The broker holds secrets (a consult key, what sessions have read): no other process of
    // the same user may read its memory or environment.
    if let Err(error) = sandbox::make_non_dumpable() {
        eprintln!("brokerd: cannot protect this process's memory (PR_SET_DUMPABLE): {error}");
        return ExitCode::from(1);
    }
    let verbose = std::env::var("BOXMAKER_LOG").is_ok_and(|v| v == "debug");
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(if verbose {
            tracing::Level::DEBUG
        } else {
            tracing::Level::INFO
        })
        .init();
    // The async threads only move frames and decide; tools and the audit's writes run on the
    // blocking pool. One async thread per four cores: measured on two, one thread (instead of
    // one per core) cut the 1-client round trip from 512-566 us to 417-458 us and raised
    // 16 clients from about 5,000 to 6,500 calls a second, fewer threads waking each other.
    let async_threads = std::thread::available_parallelism().map_or(1, |n| (n.get() / 4).max(1));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(async_threads)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("brokerd: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let options = brokerd::daemon::StartOptions {
            config_dir: args.config_dir,
            state_dir: args.state_dir,
            runtime_dir: args.runtime_dir,
            new_audit_segment: args.new_audit_segment,
        };
        let running = match brokerd::daemon::start(options).await {
            Ok(running) => running,
            Err(e) => {
                eprintln!("brokerd: {e}");
                return ExitCode::from(1);
            }
        };
        let socket = running.broker.dirs.agent_socket();
        tracing::info!(socket = %socket.display(), "brokerd is serving");
        let owner_socket = running.broker.dirs.owner_socket();
        let state_dir = running.broker.dirs.state.clone();
        let audit = running.broker.config.audit.clone();
        let sealing = tokio::spawn(brokerd::daemon::sealing::checkpoint_every(
            state_dir.clone(),
            audit.clone(),
        ));
        let (config_dir, runtime_dir) = (
            running.broker.dirs.config.clone(),
            running.broker.dirs.runtime.clone(),
        );
        let brokerd::daemon::startup::Running {
            broker,
            listener,
            owner_listener,
            agent_cap,
            owner_cap,
            locks,
            watcher,
        } = running;
        let owner = std::sync::Arc::clone(&broker);
        let stopping = std::sync::Arc::clone(&broker);
        let jobs = std::sync::Arc::clone(&broker.jobs);
        let (served, reason) = tokio::select! {
            served = brokerd::daemon::server::serve(broker, listener, agent_cap) => (served, "the agent socket failed"),
            served = brokerd::daemon::owner::serve(owner, owner_listener, owner_cap) => (served, "the owner socket failed"),
            signal = shutdown() => (Ok(()), signal),
        };
        sealing.abort();
        // The run's last record says it stopped on purpose (a run without one ended in a
        // crash), then the stop's checkpoint covers it.
        let stopped = ledger::Event::Stopped {
            reason: reason.to_string(),
        };
        if let Err(e) = stopping.journal.record(vec![stopped]).await {
            tracing::error!("the stop could not be recorded: {e}");
        }
        drop(stopping);
        let checkpointed = tokio::task::spawn_blocking(move || {
            brokerd::daemon::sealing::checkpoint_now(&state_dir, &audit)
        })
        .await;
        if let Ok(done) = checkpointed {
            if let Some(path) = done.sealed {
                tracing::info!(checkpoint = %path.display(), "sealed the audit log at stop");
            }
            if let Some(path) = done.cosigned {
                tracing::info!(cosigned = %path.display(), "the witness cosigned the audit log at stop");
            }
        }
        // No job outlives the broker: each is killed and its box gone before the exit.
        let stopped = tokio::task::spawn_blocking(move || jobs.stop_all()).await;
        if let Ok(killed @ 1..) = stopped {
            tracing::info!(killed, "killed the running jobs");
        }
        drop(watcher);
        drop(locks);
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(&owner_socket);
        proto::rendezvous::forget(&config_dir, &runtime_dir);
        match served {
            Ok(()) => {
                tracing::info!("brokerd stopped");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("brokerd: the socket failed: {e}");
                ExitCode::from(1)
            }
        }
    })
}

/// SIGTERM or SIGINT, named.
async fn shutdown() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

fn audit_verify(state_dir: Option<PathBuf>) -> ExitCode {
    let uid = rustix::process::getuid().as_raw();
    let dirs = match proto::dirs::Dirs::resolve(
        None,
        state_dir.as_deref(),
        None,
        &|name| std::env::var_os(name),
        uid,
    ) {
        Ok(dirs) => dirs,
        Err(e) => {
            eprintln!("brokerd audit verify: {e}");
            return ExitCode::from(2);
        }
    };
    match brokerd::daemon::audit::verify_state(&dirs) {
        Ok(summary) => {
            println!("{}: {summary}", dirs.audit_log().display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{}: {e}", dirs.audit_log().display());
            ExitCode::from(1)
        }
    }
}
