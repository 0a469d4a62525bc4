//! `bx watch`: the live stream of every call, decision, denial, pending approval, grant problem
//! and resume. At a terminal it also asks at each pending approval and question, so one window
//! is enough to watch an agent.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc;

use proto::dirs::Dirs;
use proto::text::{escape_terminal, escape_unicode};
use proto::{ApprovalId, OwnerEvent, OwnerReply, OwnerRequest, PendingKind, PendingView};

use crate::Exit;
use crate::commands::failed;
use crate::owner::{Owner, OwnerError};
use crate::show;

/// `bx watch`.
pub fn watch(dirs: &Dirs, json: bool) -> Exit {
    let socket = dirs.owner_socket();
    let mut stream = match Owner::connect(&socket) {
        Ok(owner) => owner,
        Err(e) => return failed(&e),
    };
    if let Err(e) = stream.send(&OwnerRequest::Watch {}) {
        return failed(&e);
    }
    let interactive = !json && std::io::stdin().is_terminal();
    if !json {
        println!(
            "Watching the broker on {} (Ctrl-C to stop).",
            socket.display()
        );
    }
    let (tx, rx) = mpsc::channel::<Result<OwnerEvent, OwnerError>>();
    std::thread::spawn(move || {
        loop {
            let next = match stream.next() {
                Ok(OwnerReply::Event { event }) => Ok(event),
                Ok(other) => Err(stream.unexpected(&other)),
                Err(e) => Err(e),
            };
            let stop = next.is_err();
            if tx.send(next).is_err() || stop {
                return;
            }
        }
    });
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    for next in rx {
        let event = match next {
            Ok(event) => event,
            Err(e) => {
                eprintln!("bx: {}", escape_terminal(&e.to_string()));
                return Exit::Failed;
            }
        };
        if json {
            match serde_json::to_string(&event) {
                Ok(line) => println!("{}", escape_unicode(&line)),
                Err(e) => eprintln!("bx: {e}"),
            }
            continue;
        }
        println!("{}", show::event(&event));
        if let (true, OwnerEvent::Pending { pending }) = (interactive, &event)
            && let Some(request) = prompt(pending, &mut input)
        {
            answer(&socket, &request);
        }
    }
    Exit::Done
}

/// Sends the owner's answer on a connection of its own and prints the broker's reply.
pub fn answer(socket: &std::path::Path, request: &OwnerRequest) -> bool {
    let reply = Owner::connect(socket).and_then(|mut owner| owner.request(request));
    match reply {
        Ok(OwnerReply::Done { message }) => {
            println!("  -> {}", escape_terminal(&message));
            true
        }
        Ok(OwnerReply::Error { message, .. }) => {
            println!("  -> not done: {}", escape_terminal(&message));
            false
        }
        Ok(other) => {
            println!(
                "  -> unexpected reply: {}",
                escape_terminal(&format!("{other:?}"))
            );
            false
        }
        Err(e) => {
            println!("  -> {}", escape_terminal(&e.to_string()));
            false
        }
    }
}

/// Asks the person at the terminal about `view`: the request to send, or `None` to leave it
/// pending.
pub fn prompt(view: &PendingView, input: &mut dyn BufRead) -> Option<OwnerRequest> {
    let approval = view.approval;
    let mut out = std::io::stdout();
    match view.kind {
        PendingKind::Approval => loop {
            let _ = write!(
                out,
                "  Let it run? [o]nce, for the [s]ession (grant {}), [r]efuse, or Enter to leave it: ",
                view.grant
                    .as_ref()
                    .map_or("(none)".into(), |g| escape_terminal(g.as_str())
                        .into_owned())
            );
            let _ = out.flush();
            let line = read_line(input)?;
            match line.trim() {
                "o" | "once" => return Some(approve(approval, false)),
                "s" | "session" => return Some(approve(approval, true)),
                "r" | "refuse" => return Some(OwnerRequest::Refuse { approval }),
                "" => return None,
                _ => println!("  Type o, s or r (or nothing)."),
            }
        },
        PendingKind::Question => {
            let _ = write!(
                out,
                "  Your answer (a choice's number, or any text; Enter to leave it): "
            );
            let _ = out.flush();
            let line = read_line(input)?;
            let text = line.trim();
            if text.is_empty() {
                return None;
            }
            let text = text
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|n| view.choices.get(n))
                .map_or_else(|| text.to_string(), Clone::clone);
            Some(OwnerRequest::Answer { approval, text })
        }
    }
}

fn approve(approval: ApprovalId, for_session: bool) -> OwnerRequest {
    OwnerRequest::Approve {
        approval,
        for_session,
    }
}

fn read_line(input: &mut dyn BufRead) -> Option<String> {
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line),
    }
}
