//! `bx memory list|show|forget|purge|export`: the memory store through the owner socket (the
//! broker records each command in the audit log). Entry texts are model-controlled: printed
//! through `escape_terminal`, except in `export` and `--json`, which are JSON.

use std::io::Write;

use proto::dirs::Dirs;
use proto::text::{escape_terminal, escape_unicode};
use proto::{MemoryEntry, OwnerReply, OwnerRequest};

use crate::commands::print_json;

use crate::Exit;
use crate::commands::failed;
use crate::owner::Owner;

fn connect(dirs: &Dirs) -> Result<Owner, Exit> {
    Owner::connect(&dirs.owner_socket()).map_err(|e| failed(&e))
}

/// Prints a refusal from the broker; exit 1.
fn refused(message: &str) -> Exit {
    eprintln!("bx: {}", escape_terminal(message));
    Exit::Failed
}

fn entries(dirs: &Dirs, request: &OwnerRequest) -> Result<(Vec<MemoryEntry>, u64), Exit> {
    let mut owner = connect(dirs)?;
    match owner.request(request) {
        Ok(OwnerReply::MemoryEntries { entries, total }) => Ok((entries, total)),
        Ok(OwnerReply::Error { message, .. }) => Err(refused(&message)),
        Ok(other) => Err(failed(&owner.unexpected(&other))),
        Err(e) => Err(failed(&e)),
    }
}

/// The lines that show one entry for a person.
pub fn entry_lines(entry: &MemoryEntry) -> String {
    let tags = if entry.tags.is_empty() {
        "no tags".to_string()
    } else {
        format!("tags {}", escape_terminal(&entry.tags.join(", ")))
    };
    let forgotten = entry
        .forgotten
        .map(|at| format!("; forgotten at {at}"))
        .unwrap_or_default();
    format!(
        "entry {}: {}{}; {tags}; written {} by session {}{forgotten}\n  {}\n",
        entry.id,
        entry.class.as_str(),
        if entry.untrusted { ", untrusted" } else { "" },
        entry.at,
        escape_terminal(entry.session.as_str()),
        escape_terminal(&entry.text)
    )
}

/// `bx memory list [--limit N] [--json]`.
pub fn list(dirs: &Dirs, limit: u64, json: bool) -> Exit {
    let (listed, total) = match entries(dirs, &OwnerRequest::MemoryList { limit }) {
        Ok(listed) => listed,
        Err(exit) => return exit,
    };
    if json {
        return print_json(&listed);
    }
    if listed.is_empty() {
        println!("The memory is empty.");
        return Exit::Done;
    }
    for entry in &listed {
        print!("{}", entry_lines(entry));
    }
    println!(
        "{} of {total} entries, newest first. `bx memory show ID` shows one whole.",
        listed.len()
    );
    Exit::Done
}

/// `bx memory show ID [--json]`.
pub fn show(dirs: &Dirs, id: u64, json: bool) -> Exit {
    let (shown, _) = match entries(dirs, &OwnerRequest::MemoryShow { id }) {
        Ok(shown) => shown,
        Err(exit) => return exit,
    };
    let Some(entry) = shown.first() else {
        return refused(&format!("there is no memory entry {id}"));
    };
    if json {
        return print_json(entry);
    }
    print!("{}", entry_lines(entry));
    Exit::Done
}

fn settle(dirs: &Dirs, request: &OwnerRequest) -> Exit {
    let mut owner = match connect(dirs) {
        Ok(owner) => owner,
        Err(exit) => return exit,
    };
    match owner.request(request) {
        Ok(OwnerReply::Done { message }) => {
            println!("{}", escape_terminal(&message));
            Exit::Done
        }
        Ok(OwnerReply::Error { message, .. }) => refused(&message),
        Ok(other) => failed(&owner.unexpected(&other)),
        Err(e) => failed(&e),
    }
}

/// `bx memory forget ID`.
pub fn forget(dirs: &Dirs, id: u64) -> Exit {
    settle(dirs, &OwnerRequest::MemoryForget { id })
}

/// `bx memory purge`.
pub fn purge(dirs: &Dirs) -> Exit {
    settle(dirs, &OwnerRequest::MemoryPurge {})
}

/// `bx memory export`: one JSON line per entry (text, tags, when, session, class, untrusted,
/// forgotten), in id order.
pub fn export(dirs: &Dirs) -> Exit {
    let mut owner = match connect(dirs) {
        Ok(owner) => owner,
        Err(exit) => return exit,
    };
    if let Err(e) = owner.send(&OwnerRequest::MemoryExport {}) {
        return failed(&e);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    loop {
        match owner.next() {
            Ok(OwnerReply::MemoryChunk { entries, last }) => {
                for entry in &entries {
                    let written = serde_json::to_string(entry)
                        .map_err(std::io::Error::other)
                        .and_then(|line| writeln!(out, "{}", escape_unicode(&line)));
                    if let Err(e) = written {
                        eprintln!("bx: cannot write the export: {e}");
                        return Exit::Failed;
                    }
                }
                if last {
                    return match out.flush() {
                        Ok(()) => Exit::Done,
                        Err(e) => {
                            eprintln!("bx: cannot write the export: {e}");
                            Exit::Failed
                        }
                    };
                }
            }
            Ok(OwnerReply::Error { message, .. }) => {
                let _ = out.flush();
                return refused(&message);
            }
            Ok(other) => return failed(&owner.unexpected(&other)),
            Err(e) => return failed(&e),
        }
    }
}
