//! `bx demo`: the README's run command. It runs the `brokerd` and `loopd` next to its own
//! executable (refusing ones from another build, told by the build id in `--version`), starts a
//! real broker on a temporary folder with a small workspace and grants, plays a bundled script
//! through `loopd chat --port broker`, answers the calls that ask (at the terminal, else by
//! `--approve` / `--refuse`, else refusing and saying so, so it never hangs), verifies the
//! audit log, stops the broker and removes the folder.

use std::io::{BufRead, IsTerminal};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use proto::{OwnerEvent, OwnerReply, OwnerRequest, PendingKind, PendingView};

use crate::Exit;
use crate::owner::Owner;
use crate::{show, watch};

const SCRIPT: &str = include_str!("../demo/script.json");
const GRANTS: &str = include_str!("../demo/grants.toml");
const PAGE: &str = include_str!("../demo/page.html");
/// The `shell` grant and turn, played where the full box is available (bubblewrap).
const SHELL_GRANT: &str = include_str!("../demo/shell_grant.toml");
const SHELL_TURN: &str = include_str!("../demo/shell_turn.json");

/// Whether `shell` joins the demo: only where its commands run in the full box (bubblewrap;
/// a box of Landlock alone leaves the host's processes and sockets in view).
fn shell_in_demo() -> bool {
    sandbox::FileWalls::detect() == sandbox::FileWalls::Bubblewrap
}

/// The script, with the `shell` turn after the first step when `shell` joins.
fn script(shell: bool) -> Result<String, String> {
    if !shell {
        return Ok(SCRIPT.to_string());
    }
    let mut script: serde_json::Value =
        serde_json::from_str(SCRIPT).map_err(|e| format!("the demo's script: {e}"))?;
    let turn: serde_json::Value =
        serde_json::from_str(SHELL_TURN).map_err(|e| format!("the demo's shell turn: {e}"))?;
    let Some(turns) = script.get_mut("turns").and_then(|t| t.as_array_mut()) else {
        return Err("the demo's script has no turns".to_string());
    };
    turns.insert(1.min(turns.len()), turn);
    serde_json::to_string_pretty(&script).map_err(|e| format!("the demo's script: {e}"))
}

/// `bx demo`'s flags.
#[derive(Args, Debug, Clone, Copy)]
pub struct DemoArgs {
    /// With no terminal to ask at: approve (once) every call that asks.
    #[arg(long, conflicts_with = "refuse")]
    approve: bool,
    /// With no terminal to ask at: refuse every call that asks.
    #[arg(long)]
    refuse: bool,
}

/// Runs the demo.
pub fn run(args: &DemoArgs) -> Exit {
    match demo(args) {
        Ok(exit) => exit,
        Err(message) => {
            eprintln!("bx demo: {message}");
            Exit::Failed
        }
    }
}

/// The broker child, stopped (SIGTERM, then SIGKILL) when dropped.
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo(args: &DemoArgs) -> Result<Exit, String> {
    let (brokerd, loopd) = binaries()?;
    let temp = tempfile::Builder::new()
        .prefix("bx-demo-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary folder: {e}"))?;
    let base = temp
        .path()
        .canonicalize()
        .map_err(|e| format!("{}: {e}", temp.path().display()))?;
    let config = base.join("config");
    let state = base.join("state");
    let runtime = base.join("rt");
    let workspace = base.join("workspace");
    let shell = shell_in_demo();
    lay_out(&config, &state, &runtime, &workspace, shell)?;

    println!("boxmaker demo: an AI agent's tool calls, each decided by a broker against grants");
    println!("that you, the owner, wrote. No model is needed: a script plays the agent.");
    println!();
    println!("  temporary folder: {}", base.display());
    println!("  the agent's workspace: {}", workspace.display());
    println!(
        "  its grants: {}",
        config.join("grants/demo.toml").display()
    );
    println!();

    let log = std::fs::File::create(base.join("brokerd.log"))
        .map_err(|e| format!("cannot write the broker's log: {e}"))?;
    let child = Command::new(&brokerd)
        .arg("serve")
        .arg("--config-dir")
        .arg(&config)
        .arg("--state-dir")
        .arg(&state)
        .arg("--runtime-dir")
        .arg(&runtime)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", brokerd.display()))?;
    let mut broker = Broker(child);
    let owner_socket = runtime.join(proto::dirs::OWNER_SOCKET);
    let watcher = wait_for_broker(&mut broker, &owner_socket, &base)?;
    println!("The broker is running (brokerd, pid {}).", broker.0.id());
    println!("The agent runs as `loopd chat --port broker`; its calls follow.");
    println!();

    let answering = Answering::choose(args);
    let socket = owner_socket.clone();
    std::thread::spawn(move || answer_events(watcher, &socket, answering));

    let script = base.join("script.json");
    std::fs::write(&script, self::script(shell)?)
        .map_err(|e| format!("{}: {e}", script.display()))?;
    let status = Command::new(&loopd)
        .arg("chat")
        .arg("--port")
        .arg("broker")
        .arg("--model")
        .arg(format!("script:{}", script.display()))
        .arg("--socket")
        .arg(runtime.join(proto::dirs::AGENT_SOCKET))
        .arg("--state-dir")
        .arg(&state)
        .arg("--var")
        .arg(format!("config={}", config.display()))
        .current_dir(&workspace)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start {}: {e}", loopd.display()))?;

    println!();
    let verified = ledger::verify_with_ledger(
        &state.join(proto::dirs::AUDIT_FILE),
        &state.join(proto::dirs::LEDGER_FILE),
    );
    drop(broker);
    println!(
        "Every call above, allowed or not, is in the hash-chained audit log. `bx audit verify`:"
    );
    let exit = match &verified {
        Ok(summary) => {
            println!("  {summary}");
            Exit::Done
        }
        Err(e) => {
            println!("  {e}");
            Exit::Failed
        }
    };
    println!();
    println!("The broker is stopped and the temporary folder removed. To use boxmaker for real:");
    println!(
        "  bx grants preset coding --workspace ~/src/your-project   # then: brokerd, and bx watch"
    );
    drop(temp);
    if !status.success() {
        eprintln!("bx demo: loopd ended with {status}");
        return Ok(Exit::Failed);
    }
    Ok(exit)
}

/// Finds `brokerd` and `loopd` next to this executable, from this very build.
fn binaries() -> Result<(PathBuf, PathBuf), String> {
    let here = std::env::current_exe().map_err(|e| format!("cannot find bx itself: {e}"))?;
    let dir = here
        .parent()
        .ok_or_else(|| format!("{} has no folder", here.display()))?;
    let build = if dir.ends_with("release") {
        "cargo build --release"
    } else {
        "cargo build"
    };
    let ours = env!("BOXMAKER_BUILD_ID");
    let mut found = Vec::new();
    for name in ["brokerd", "loopd"] {
        let path = dir.join(name);
        if !path.exists() {
            return Err(format!(
                "{} is missing: bx demo runs the brokerd and loopd next to it; build them with `{build}`",
                path.display()
            ));
        }
        let output = Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|e| format!("cannot run {} --version: {e}", path.display()))?;
        let version = String::from_utf8_lossy(&output.stdout);
        let id = version
            .split("(build ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or("none");
        if id != ours {
            return Err(format!(
                "{} is from another build (build {id}; this bx is build {ours}): rebuild them together with `{build}`",
                path.display()
            ));
        }
        found.push(path);
    }
    let loopd = found.pop().unwrap_or_default();
    let brokerd = found.pop().unwrap_or_default();
    Ok((brokerd, loopd))
}

fn lay_out(
    config: &Path,
    state: &Path,
    runtime: &Path,
    workspace: &Path,
    shell: bool,
) -> Result<(), String> {
    let private = |dir: &Path| {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))
    };
    for dir in [
        config.join("grants"),
        state.to_path_buf(),
        runtime.to_path_buf(),
    ] {
        private(&dir)?;
    }
    for dir in ["saved", "drafts", "secret", "outbox"] {
        private(&workspace.join(dir))?;
    }
    let write = |path: PathBuf, text: &str| {
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    let ws = workspace.display().to_string();
    let mut grants = GRANTS.to_string();
    if shell {
        grants.push_str(SHELL_GRANT);
    }
    write(
        config.join("grants/demo.toml"),
        &grants.replace("{workspace}", &ws),
    )?;
    // Short waits, so that a demo left alone at a terminal still ends.
    write(
        config.join("brokerd.toml"),
        "approval_ms = 120000\npending_grace_ms = 5000\n",
    )?;
    write(
        workspace.join("notes.txt"),
        "Buy milk.\nCall the plumber.\n",
    )?;
    write(workspace.join("saved/page.html"), PAGE)?;
    write(
        workspace.join("secret/key.txt"),
        "demo-key-4f1c9a (a stand-in for a real secret)\n",
    )?;
    Ok(())
}

/// Waits until the broker answers on its owner socket, and starts the watch stream.
fn wait_for_broker(broker: &mut Broker, socket: &Path, base: &Path) -> Result<Owner, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = broker.0.try_wait() {
            let log = std::fs::read_to_string(base.join("brokerd.log")).unwrap_or_default();
            return Err(format!("brokerd stopped at start ({status}):\n{log}"));
        }
        if let Ok(mut owner) = Owner::connect(socket) {
            owner
                .send(&OwnerRequest::Watch {})
                .map_err(|e| e.to_string())?;
            return Ok(owner);
        }
        if Instant::now() >= deadline {
            return Err("brokerd did not open its owner socket within 20 s".to_string());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How the demo answers the calls that ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// Ask the person at the terminal.
    Terminal,
    /// `--approve`.
    Approve,
    /// `--refuse`.
    Refuse,
    /// No terminal and no flag: refuse, saying so.
    RefuseUnasked,
}

impl Answering {
    fn choose(args: &DemoArgs) -> Answering {
        if std::io::stdin().is_terminal() && !args.approve && !args.refuse {
            Answering::Terminal
        } else if args.approve {
            Answering::Approve
        } else if args.refuse {
            Answering::Refuse
        } else {
            Answering::RefuseUnasked
        }
    }
}

/// Answers each pending approval as the demo was told to, and explains it.
fn answer_events(mut watcher: Owner, socket: &Path, answering: Answering) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    while let Ok(OwnerReply::Event { event }) = watcher.next() {
        let OwnerEvent::Pending { pending } = event else {
            continue;
        };
        println!();
        println!("  >> The broker asks you, the owner (as `bx approvals` would show it):");
        for line in show::pending(&pending).lines() {
            println!("  >>   {line}");
        }
        let request = decide(&pending, answering, &mut input);
        watch::answer(socket, &request);
        println!();
    }
}

fn decide(view: &PendingView, answering: Answering, input: &mut dyn BufRead) -> OwnerRequest {
    let approval = view.approval;
    let refuse = match view.kind {
        PendingKind::Approval => OwnerRequest::Refuse { approval },
        PendingKind::Question => OwnerRequest::Answer {
            approval,
            text: "No answer: the demo has no one to ask.".to_string(),
        },
    };
    match answering {
        Answering::Terminal => {
            for _ in 0..3 {
                if let Some(request) = watch::prompt(view, input) {
                    return request;
                }
                println!("  (the agent waits for your answer)");
            }
            println!("  >> No answer: refusing.");
            refuse
        }
        Answering::Approve => {
            println!("  >> --approve: approving once.");
            OwnerRequest::Approve {
                approval,
                for_session: false,
            }
        }
        Answering::Refuse => {
            println!("  >> --refuse: refusing.");
            refuse
        }
        Answering::RefuseUnasked => {
            println!(
                "  >> No terminal to ask at and no --approve or --refuse: refusing, so the demo never waits."
            );
            refuse
        }
    }
}

#[cfg(test)]
mod tests {
    use super::script;

    #[test]
    fn the_demo_plays_a_shell_turn_only_where_the_full_box_is() {
        let with = script(true).unwrap();
        let without = script(false).unwrap();
        assert!(with.contains("\"shell\""), "{with}");
        assert!(!without.contains("\"shell\""), "{without}");
    }
}
