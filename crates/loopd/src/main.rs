//! The `loopd` binary: `loopd chat` and `loopd demo`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use loopd::chat::{
    ChatError, ChatOptions, DEFAULT_SYSTEM_PROMPT, ModelSource, PortKind, StateFolder, run_chat,
};
use loopd::criteria::Criteria;
use loopd::llama::{LlamaConfig, ToolChoice};
use loopd::tools::Registry;
use loopd::turn::Limits;
use proto::dirs::Dirs;
use proto::text::escape_terminal;

/// boxmaker's agent loop: runs a conversation against an OpenAI-compatible model and sends
/// every tool call through a port.
#[derive(Parser)]
#[command(
    name = "loopd",
    version = concat!(env!("CARGO_PKG_VERSION"), " (build ", env!("BOXMAKER_BUILD_ID"), ")")
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Chat: messages from --message, from the script, or from standard input (the terminal).
    // The usage clap writes lists the flags a command line used as if they were required.
    #[command(override_usage = "loopd chat --port <broker|fake> [OPTIONS]")]
    Chat(Box<ChatArgs>),
    /// Play the bundled demo: find a tool, call it, meet a denial, ask the clock (in a temporary
    /// folder, removed at the end).
    Demo(DemoArgs),
}

#[derive(Args)]
struct ChatArgs {
    /// The model: an OpenAI-compatible base URL, or script:FILE to play a script.
    #[arg(long, default_value = "http://127.0.0.1:8080/v1")]
    model: String,
    /// Where tool calls go. Required: "broker" (brokerd's agent socket) or "fake" (echo
    /// answers, everything else is denied).
    #[arg(long)]
    port: String,
    /// brokerd's agent socket, with --port broker (default: agent.sock in the runtime folder,
    /// $BOXMAKER_RUNTIME_DIR, else $XDG_RUNTIME_DIR/boxmaker, else /tmp/boxmaker-<uid>; where
    /// that default holds no socket, the folder the running broker recorded in its config
    /// folder's brokerd.runtime).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// boxmaker's state folder; conversations are kept in its sessions/ (default:
    /// $BOXMAKER_STATE_DIR, else $XDG_STATE_HOME/boxmaker, else ~/.local/state/boxmaker).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// A message to send; repeat for several turns.
    #[arg(long = "message", short = 'm')]
    messages: Vec<String>,
    /// A file whose text is the system prompt of a new session.
    #[arg(long)]
    system: Option<PathBuf>,
    /// Continue this session instead of starting one.
    #[arg(long)]
    session: Option<String>,
    /// Code mode: the owner's acceptance criteria, one a line. A verifier (the model in an
    /// isolated context, without tools) checks them when the model says it is done; up to two
    /// corrections follow. Kept in the session's folder: a resumed session stays in code mode
    /// (this flag there replaces its criteria).
    #[arg(long)]
    criteria: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
    /// The `model` field sent to the server.
    #[arg(long, default_value = "default")]
    model_name: String,
    /// Seconds one model request may take.
    #[arg(long, default_value_t = 300.0)]
    timeout: f64,
    /// Ask for whole answers instead of streamed ones.
    #[arg(long)]
    no_stream: bool,
    /// max_tokens for each request.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// temperature for each request.
    #[arg(long)]
    temperature: Option<f64>,
    /// The environment variable holding the server's API key (sent as a bearer token).
    #[arg(long)]
    api_key_env: Option<String>,
    /// Model requests per turn.
    #[arg(long, default_value_t = Limits::default().max_rounds)]
    max_rounds: usize,
    /// Tool calls per turn.
    #[arg(long, default_value_t = Limits::default().max_tool_calls)]
    max_tool_calls: usize,
    /// Bytes of a tool result the model sees.
    #[arg(long, default_value_t = Limits::default().result_cap)]
    result_cap: usize,
    /// tool_choice of each turn's first request: auto (the default), none, required, or a
    /// tool's name (makes a small model start with that tool). Every later request says auto,
    /// and none once --max-tool-calls are spent.
    #[arg(long)]
    first_tool_choice: Option<String>,
}

#[derive(Args)]
struct DemoArgs {
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct CommonArgs {
    /// A script placeholder value, as NAME=VALUE (workspace and home have defaults).
    #[arg(long = "var", value_parser = parse_var)]
    vars: Vec<(String, String)>,
    /// Print events as JSON lines.
    #[arg(long)]
    json: bool,
}

fn parse_var(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

fn main() -> ExitCode {
    // loopd holds the model server's key and the conversation: no other process of this user
    // (a command run by a tool included) may read its memory or environment. A process that
    // cannot protect them says so and stops.
    if let Err(error) = sandbox::make_non_dumpable() {
        eprintln!(
            "loopd: cannot make this process non-dumpable (PR_SET_DUMPABLE): {error}; refusing to run with its memory readable"
        );
        return ExitCode::from(1);
    }
    let cli = Cli::parse();
    let options = match cli.command {
        Command::Chat(args) => chat_options(*args),
        Command::Demo(args) => Ok(demo_options(args)),
    };
    let options = match options {
        Ok(options) => options,
        Err(message) => {
            eprintln!("loopd: {}", escape_terminal(&message));
            return ExitCode::from(2);
        }
    };
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut notices = std::io::stderr().lock();
    match run_chat(&options, &mut input, interactive, &mut out, &mut notices) {
        Ok(summary) if summary.failed == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(ChatError::Port(error)) if error.is_no_broker() => {
            eprintln!("loopd: {}", escape_terminal(&error.to_string()));
            ExitCode::from(3)
        }
        // The reader of our output went away (`loopd demo | head`): nothing left to say.
        Err(ChatError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("loopd: {}", escape_terminal(&error.to_string()));
            ExitCode::from(2)
        }
    }
}

/// The environment, for the folder lookups.
fn env(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

/// The state folder as brokerd finds it (`proto::dirs`).
fn state_dir(flag: Option<&std::path::Path>) -> Result<std::path::PathBuf, String> {
    Dirs::state_dir(flag, &env).map_err(|e| e.to_string())
}

/// The agent socket in the runtime folder as brokerd finds it (`proto::dirs`), or, where that
/// holds no socket, in the folder the running broker recorded (`proto::rendezvous`).
fn agent_socket() -> Result<std::path::PathBuf, String> {
    let config = Dirs::config_dir(None, &env).ok();
    proto::rendezvous::runtime_for_client(
        None,
        config.as_deref(),
        &env,
        rustix::process::getuid().as_raw(),
    )
    .map(|runtime| runtime.join(proto::dirs::AGENT_SOCKET))
    .map_err(|e| e.to_string())
}

fn chat_options(args: ChatArgs) -> Result<ChatOptions, String> {
    let model = ModelSource::parse(&args.model)?;
    let port = PortKind::parse(&args.port, args.socket.clone(), agent_socket)?;
    let state = StateFolder::Dir(state_dir(args.state_dir.as_deref())?);
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 86_400.0) {
        return Err(format!(
            "--timeout {} must be more than 0 and at most 86400 seconds",
            args.timeout
        ));
    }
    if args.max_rounds == 0 || args.result_cap == 0 {
        return Err("--max-rounds and --result-cap must be at least 1".to_string());
    }
    let system_prompt = match (&args.system, &args.session) {
        (Some(_), Some(id)) => {
            return Err(format!(
                "--system sets the system prompt of a new session, and session {id} keeps the one it was started with: leave out --system, or --session to start a new session"
            ));
        }
        (Some(path), None) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --system {}: {e}", path.display()))?,
        (None, _) => DEFAULT_SYSTEM_PROMPT.to_string(),
    };
    let criteria = match &args.criteria {
        Some(path) => Some(Criteria::from_file(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let first_tool_choice = match args.first_tool_choice.as_deref() {
        Some(text) => Some(first_tool_choice(text)?),
        None => None,
    };
    let api_key = match &args.api_key_env {
        Some(name) => {
            Some(std::env::var(name).map_err(|_| format!("--api-key-env: {name} is not set"))?)
        }
        None => None,
    };
    Ok(ChatOptions {
        model,
        llama: LlamaConfig {
            model_name: args.model_name,
            stream: !args.no_stream,
            timeout: Duration::from_secs_f64(args.timeout),
            max_tokens: args.max_tokens,
            temperature: args.temperature,
            api_key,
            ..LlamaConfig::default()
        },
        port,
        messages: args.messages,
        state,
        session: args.session,
        vars: args.common.vars.into_iter().collect::<BTreeMap<_, _>>(),
        system_prompt,
        json: args.common.json,
        limits: Limits {
            max_rounds: args.max_rounds,
            max_tool_calls: args.max_tool_calls,
            result_cap: args.result_cap,
            first_tool_choice,
        },
        criteria,
    })
}

/// `--first-tool-choice`: `auto`, `none`, `required`, or a tool of the `tools` array every
/// session sends (a server refuses any other name, and only after a request has been made).
fn first_tool_choice(text: &str) -> Result<ToolChoice, String> {
    let choice = ToolChoice::parse(text);
    if let ToolChoice::Function(name) = &choice {
        let core: Vec<String> = Registry::m3a()
            .core_schemas()
            .into_iter()
            .map(|schema| schema.name)
            .collect();
        if !core.contains(name) {
            return Err(format!(
                "--first-tool-choice {name:?} is not a tool the model is given: use auto, none, required or one of {} (other tools are reached through call_tool)",
                core.join(", ")
            ));
        }
    }
    Ok(choice)
}

fn demo_options(args: DemoArgs) -> ChatOptions {
    ChatOptions {
        model: ModelSource::Demo,
        llama: LlamaConfig::default(),
        port: PortKind::Fake,
        messages: Vec::new(),
        state: StateFolder::Temporary,
        session: None,
        vars: args.common.vars.into_iter().collect(),
        system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
        json: args.common.json,
        limits: Limits::default(),
        criteria: None,
    }
}
