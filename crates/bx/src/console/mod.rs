//! `bx console`: the owner's console, a web page on a loopback port. It prints a one-time
//! login address; the page then holds a session cookie. It talks to the broker over the owner
//! socket only, with the same powers as `bx`, and keeps nothing but its login token and
//! sessions, in memory. Its views: the Inbox (every waiting approval and question, live, with
//! the owner's answers), Live calls, Sessions (with a timeline), Audit and Grants; see
//! docs/CONSOLE.md.

mod audit;
mod broker;
mod calls;
mod grants;
mod guard;
mod history;
mod http;
mod page;
mod serve;
mod sessions;
mod timeline;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proto::dirs::Dirs;
use proto::text::escape_terminal;

use crate::Exit;
use crate::commands::failed;
use crate::owner::Owner;

/// `bx console`'s options.
#[derive(clap::Args)]
pub struct ConsoleArgs {
    /// The address to listen on: an IP address and port (port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Listen on an address that is not loopback. Anyone who can reach it can try the login
    /// address, and the traffic is plain HTTP: for a network you trust only.
    #[arg(long)]
    allow_non_loopback: bool,
}

/// `bx console`: serves until interrupted.
pub fn run(dirs: &Dirs, args: &ConsoleArgs) -> Exit {
    if !args.listen.ip().is_loopback() && !args.allow_non_loopback {
        eprintln!(
            "bx: {} is not a loopback address; the console listens on loopback unless given --allow-non-loopback",
            args.listen
        );
        return Exit::Usage;
    }
    let socket = dirs.owner_socket();
    if let Err(e) = Owner::connect(&socket) {
        return failed(&e);
    }
    let token = match guard::secret() {
        Ok(token) => token,
        Err(e) => {
            eprintln!("bx: no randomness for the login token: {e}");
            return Exit::Failed;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bx: cannot start the console's runtime: {e}");
            return Exit::Failed;
        }
    };
    runtime.block_on(serve_forever(args.listen, dirs.clone(), token))
}

async fn serve_forever(listen: SocketAddr, dirs: Dirs, token: String) -> Exit {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("bx: cannot listen on {listen}: {e}");
            return Exit::Failed;
        }
    };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("bx: cannot listen on {listen}: {e}");
            return Exit::Failed;
        }
    };
    let console = Arc::new(serve::Console {
        hosts: guard::Hosts::for_addr(addr),
        gate: guard::Gate::new(token.clone()),
        cookie: serve::cookie_for(addr),
        socket: dirs.owner_socket(),
        dirs,
    });
    println!(
        "The owner's console; open this address once, within {} minutes (Ctrl-C to stop):",
        guard::LOGIN_LIFETIME.as_secs() / 60
    );
    println!("{}", serve::login_address(addr, &token));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = tokio::signal::ctrl_c() => return Exit::Done,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                eprintln!("bx: {}", escape_terminal(&e.to_string()));
                continue;
            }
        };
        let console = Arc::clone(&console);
        tokio::spawn(async move {
            let service = service_fn(move |request| serve::handle(Arc::clone(&console), request));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
