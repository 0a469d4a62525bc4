//! `bx mcp`: the broker's gated tools to an MCP client over standard input and output, or over
//! streamable HTTP with `--http` (the `mcp` crate). On standard input and output, standard
//! output is the protocol's: everything else goes to standard error.

use std::sync::Arc;

use clap::{Args, ValueEnum};

use crate::Exit;

/// `bx mcp`'s flags.
#[derive(Args, Clone)]
pub struct McpArgs {
    /// The broker session to serve: its resume token is kept in the state folder, so a
    /// restarted client gets the same session and labels (default: one per client name and
    /// workspace).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Start a new broker session, replacing the one kept under that name (its labels start
    /// clean; the broker records the new session in the audit log).
    #[arg(long)]
    pub new_session: bool,
    /// The tools `tools/list` offers: `core` (clock, find_tool, call_tool, as loopd's model
    /// sees them) or `all` (also every tool a live grant could cover). `--tools` is the same
    /// flag, for launchers that take `--catalog` as their own (MCP Inspector's CLI does).
    #[arg(long, visible_alias = "tools", value_enum, default_value_t = CatalogArg::Core)]
    pub catalog: CatalogArg,
    /// Serve MCP's streamable HTTP at http://ADDR/mcp instead of standard input and output
    /// (e.g. 127.0.0.1:8765; port 0 picks one, printed on standard error). Needs --token-file.
    #[arg(long, value_name = "ADDR", requires = "token_file")]
    pub http: Option<std::net::SocketAddr>,
    /// The file whose first line is the bearer token every HTTP request must carry
    /// (`Authorization: Bearer TOKEN`, at least 16 characters). It must be yours and mode 0600
    /// (else refused, with the chmod that fixes it); when missing, a new random token is
    /// written to it, mode 0600.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<std::path::PathBuf>,
    /// While a call waits for the owner, send the client a progress notification every
    /// SECONDS (a decimal, e.g. 0.5), so a client that resets its timeout on progress
    /// (the TypeScript SDK with `resetTimeoutOnProgress`, MCP Inspector) keeps waiting.
    #[arg(long, value_name = "SECONDS", value_parser = seconds, default_value = "10")]
    pub progress_every: std::time::Duration,
}

/// `--progress-every`'s value: a positive number of seconds, at most a day.
fn seconds(text: &str) -> Result<std::time::Duration, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds (e.g. 10 or 0.5)"))?;
    if !(value > 0.0 && value <= 86_400.0) {
        return Err(format!(
            "{text} is not between 0 and 86400 seconds: give e.g. 10 or 0.5"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(value))
}

/// `--catalog`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CatalogArg {
    /// clock, find_tool, call_tool.
    Core,
    /// The core and every tool a live grant could cover.
    All,
}

/// Serves until the client is gone (it closed standard input, or this process's parent died).
pub fn run(dirs: &proto::dirs::Dirs, args: &McpArgs) -> Exit {
    let workspace = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("bx mcp: cannot read the working folder: {e}");
            return Exit::Failed;
        }
    };
    let connect = mcp::BrokerConnect {
        socket: dirs.agent_socket(),
        state_dir: dirs.state.clone(),
        name: args.session.clone(),
        new_session: args.new_session,
        workspace,
    };
    let catalog = match args.catalog {
        CatalogArg::Core => mcp::Catalog::Core,
        CatalogArg::All => mcp::Catalog::All,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bx mcp: cannot start its runtime: {e}");
            return Exit::Failed;
        }
    };
    let gate = mcp::Gate::new(catalog, Arc::new(connect)).with_progress_every(args.progress_every);
    let served = match (&args.http, &args.token_file) {
        (Some(addr), Some(token_file)) => {
            let token = match mcp::token_or_new(token_file) {
                Ok((token, new)) => {
                    if new {
                        eprintln!(
                            "bx mcp: wrote a new token to {} (mode 0600): give its first line to the client as Authorization: Bearer TOKEN",
                            proto::text::escape_terminal(&token_file.display().to_string())
                        );
                    }
                    token
                }
                Err(e) => {
                    eprintln!("bx mcp: {}", proto::text::escape_terminal(&e));
                    return Exit::Usage;
                }
            };
            let options = mcp::HttpOptions { addr: *addr, token };
            runtime.block_on(mcp::serve_http(gate, options, |bound| {
                eprintln!("bx mcp: serving MCP on http://{bound}{}", mcp::http::PATH);
            }))
        }
        _ => runtime.block_on(mcp::serve_stdio(gate)),
    };
    // A call still running in the broker is not waited for: its client is gone, and the
    // broker records its answer.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match served {
        Ok(()) => Exit::Done,
        Err(e) => {
            eprintln!("bx mcp: {}", proto::text::escape_terminal(&e));
            Exit::Failed
        }
    }
}
