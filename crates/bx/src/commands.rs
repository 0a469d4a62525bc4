//! The short commands: `approvals`, `approve`, `refuse`, `answer`, `status`, `audit verify`.

use proto::dirs::Dirs;
use proto::text::{escape_terminal, escape_unicode};
use proto::{ApprovalId, OwnerReply, OwnerRequest};

use crate::Exit;
use crate::owner::{Owner, OwnerError};
use crate::show;

/// Prints an owner-socket error and gives its exit status.
pub fn failed(error: &OwnerError) -> Exit {
    eprintln!("bx: {}", escape_terminal(&error.to_string()));
    match error {
        OwnerError::NoBroker(_) => Exit::NoBroker,
        OwnerError::Broken { .. } => Exit::Failed,
    }
}

fn connect(dirs: &Dirs) -> Result<Owner, Exit> {
    Owner::connect(&dirs.owner_socket()).map_err(|e| failed(&e))
}

/// `bx approvals`.
pub fn approvals(dirs: &Dirs, json: bool) -> Exit {
    let mut owner = match connect(dirs) {
        Ok(owner) => owner,
        Err(exit) => return exit,
    };
    let pending = match owner.request(&OwnerRequest::ListPending {}) {
        Ok(OwnerReply::Pending { pending }) => pending,
        Ok(other) => return failed(&owner.unexpected(&other)),
        Err(e) => return failed(&e),
    };
    if json {
        return print_json(&pending);
    } else if pending.is_empty() {
        println!("Nothing waits for you.");
    } else {
        for view in &pending {
            print!("{}", show::pending(view));
        }
        println!("Answer with `bx approve ID [--session]`, `bx refuse ID` or `bx answer ID TEXT`.");
    }
    Exit::Done
}

fn settle(dirs: &Dirs, request: OwnerRequest) -> Exit {
    let mut owner = match connect(dirs) {
        Ok(owner) => owner,
        Err(exit) => return exit,
    };
    match owner.request(&request) {
        Ok(OwnerReply::Done { message }) => {
            println!("{}", escape_terminal(&message));
            Exit::Done
        }
        Ok(OwnerReply::Error { message, .. }) => {
            eprintln!("bx: {}", escape_terminal(&message));
            Exit::Failed
        }
        Ok(other) => failed(&owner.unexpected(&other)),
        Err(e) => failed(&e),
    }
}

/// `bx approve ID [--session]`.
pub fn approve(dirs: &Dirs, id: u64, for_session: bool) -> Exit {
    settle(
        dirs,
        OwnerRequest::Approve {
            approval: ApprovalId(id),
            for_session,
        },
    )
}

/// `bx refuse ID`.
pub fn refuse(dirs: &Dirs, id: u64) -> Exit {
    settle(
        dirs,
        OwnerRequest::Refuse {
            approval: ApprovalId(id),
        },
    )
}

/// `bx answer ID TEXT`.
pub fn answer(dirs: &Dirs, id: u64, text: String) -> Exit {
    if text.trim().is_empty() {
        eprintln!("bx: the answer is empty; write what the model should read");
        return Exit::Usage;
    }
    settle(
        dirs,
        OwnerRequest::Answer {
            approval: ApprovalId(id),
            text,
        },
    )
}

/// `bx status`.
pub fn status(dirs: &Dirs, json: bool) -> Exit {
    let mut owner = match connect(dirs) {
        Ok(owner) => owner,
        Err(exit) => {
            if exit == Exit::NoBroker {
                eprintln!(
                    "bx: the agent socket would be {}; `bx grants check` and `bx audit verify` work without a broker",
                    dirs.agent_socket().display()
                );
            }
            return exit;
        }
    };
    let status = match owner.request(&OwnerRequest::Status {}) {
        Ok(OwnerReply::Status { status }) => status,
        Ok(other) => return failed(&owner.unexpected(&other)),
        Err(e) => return failed(&e),
    };
    if json {
        return print_json(&status);
    }
    println!(
        "brokerd {} (pid {}) is running",
        escape_terminal(&status.version),
        status.pid
    );
    println!("  agent socket: {}", escape_terminal(&status.agent_socket));
    println!("  owner socket: {}", escape_terminal(&status.owner_socket));
    println!("  sessions:     {} open", status.sessions);
    println!("  waiting:      {} for you", status.pending);
    if status.grant_problems.is_empty() {
        println!("  grants:       {} in force", status.grants);
    } else {
        println!(
            "  grants:       {} problem(s); every call is refused until they are fixed:",
            status.grant_problems.len()
        );
        for problem in &status.grant_problems {
            println!("    {}", escape_terminal(problem));
        }
    }
    println!("  walls:");
    for wall in &status.walls {
        println!("    - {}", escape_terminal(wall));
    }
    Exit::Done
}

/// `bx audit verify`, through the one library check (no broker needed).
pub fn audit_verify(dirs: &Dirs) -> Exit {
    let log = dirs.audit_log();
    if !log.exists() {
        eprintln!(
            "bx: there is no audit log at {}: no broker has run with this state folder (pass --state-dir)",
            log.display()
        );
        return Exit::Failed;
    }
    match ledger::verify_with_ledger(&log, &dirs.ledger()) {
        Ok(summary) => {
            println!(
                "{}: {}",
                log.display(),
                escape_terminal(&summary.to_string())
            );
            Exit::Done
        }
        Err(e) => {
            println!("{}: {}", log.display(), escape_terminal(&e.to_string()));
            Exit::Failed
        }
    }
}

/// Prints `value` as pretty JSON (`--json`), every character a terminal acts on written as
/// JSON's `\uXXXX` (`escape_unicode`: the same value, shown unambiguously); a value that
/// cannot be written is a failure.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Exit {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{}", escape_unicode(&text));
            Exit::Done
        }
        Err(e) => {
            eprintln!("bx: {e}");
            Exit::Failed
        }
    }
}
