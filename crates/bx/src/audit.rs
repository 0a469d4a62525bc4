//! `bx audit checkpoint`, `prove`, `consistency`, and `verify` with a checkpoint or a proof:
//! the Merkle tree over the audit log (RFC 9162), made and checked offline from the log in the
//! state folder, with no broker.
//!
//! A checkpoint's origin names the log by its id (from its first record, so a moved state
//! folder keeps it), so a checkpoint or proof of another log is refused as such.

use std::path::{Path, PathBuf};

use clap::Args;
use ledger::{Checkpoint, LogTree, Proof};
use proto::dirs::Dirs;
use proto::text::escape_terminal;

use crate::Exit;

/// `bx audit verify`'s options: with none, the chain check alone, as it always printed.
#[derive(Args, Clone, Debug, Default)]
pub struct VerifyArgs {
    /// Also check the log against a checkpoint (`bx audit checkpoint`'s text): its first SIZE
    /// records must still hash to the checkpoint's root. Give two (an old and a newer one) to
    /// take both roots of a consistency proof from checkpoints.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Vec<PathBuf>,
    /// Also check a proof (`bx audit prove` or `bx audit consistency`'s text) against the
    /// checkpoints' roots; a root no checkpoint gives is recomputed from the log.
    #[arg(long, value_name = "FILE")]
    pub proof: Option<PathBuf>,
    /// Also check every sealed checkpoint in the state folder's `seal/` against the root
    /// public key `bx audit seal init` printed (base64), and the log against each.
    #[arg(long, value_name = "KEY")]
    pub seal_root: Option<String>,
    /// Also check the log against the folder of a witness (`bx audit witness --dir DIR`): every
    /// cosignature with the witness's key, and every record it cosigned still as it was,
    /// naming the first that is not. Needs only the log and DIR.
    #[arg(long, value_name = "DIR")]
    pub witness: Option<PathBuf>,
}

/// The tree of the state folder's log, or the exit after saying why there is none.
pub fn tree(dirs: &Dirs) -> Result<LogTree, Exit> {
    let log = dirs.audit_log();
    if !log.exists() {
        eprintln!(
            "bx: there is no audit log at {}: no broker has run with this state folder (pass --state-dir)",
            log.display()
        );
        return Err(Exit::Failed);
    }
    LogTree::read(&log, ledger::audit::origin_of(&dirs.state)).map_err(|e| {
        eprintln!("bx: {}", escape_terminal(&e.to_string()));
        Exit::Failed
    })
}

/// Prints a text made from the tree, line by line (a state folder's path is shown, never
/// acted on by the terminal), or the reason it cannot be made.
fn print_made(made: Result<String, ledger::TreeError>) -> Exit {
    match made {
        Ok(text) => {
            for line in text.lines() {
                println!("{}", escape_terminal(line));
            }
            Exit::Done
        }
        Err(e) => {
            eprintln!("bx: {}", escape_terminal(&e.to_string()));
            Exit::Failed
        }
    }
}

/// `bx audit checkpoint [--size N]`: the log's size and root, as a checkpoint's text.
pub fn checkpoint(dirs: &Dirs, size: Option<u64>) -> Exit {
    match tree(dirs) {
        Ok(tree) => print_made(tree.checkpoint(size).map(|c| c.to_string())),
        Err(exit) => exit,
    }
}

/// `bx audit prove RECORD [--size N]`: the inclusion proof of a record.
pub fn prove(dirs: &Dirs, record: u64, size: Option<u64>) -> Exit {
    match tree(dirs) {
        Ok(tree) => print_made(tree.prove(record, size).map(|p| p.to_string())),
        Err(exit) => exit,
    }
}

/// `bx audit consistency OLD [NEW]`: the consistency proof between two sizes (NEW: the log's).
pub fn consistency(dirs: &Dirs, old: u64, new: Option<u64>) -> Exit {
    match tree(dirs) {
        Ok(tree) => {
            let new = new.unwrap_or(tree.size());
            print_made(tree.consistency(old, new).map(|p| p.to_string()))
        }
        Err(exit) => exit,
    }
}

/// Reads and parses one text file for `verify`, printing what is wrong with it.
fn read_text<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, ledger::audit::TextError>,
) -> Option<T> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            println!("{}: cannot be read: {e}", path.display());
            return None;
        }
    };
    match parse(&text) {
        Ok(value) => Some(value),
        Err(e) => {
            println!(
                "{}: {}",
                path.display(),
                escape_terminal(&format!("not a checkpoint or proof text, {e}"))
            );
            None
        }
    }
}

/// `bx audit verify`: the chain (its line as it always was), then each checkpoint and the
/// proof given, one line each; exit 1 when any of them fails.
pub fn verify(dirs: &Dirs, args: &VerifyArgs) -> Exit {
    let chain = crate::commands::audit_verify(dirs);
    if args.checkpoint.is_empty()
        && args.proof.is_none()
        && args.seal_root.is_none()
        && args.witness.is_none()
    {
        return chain;
    }
    let Ok(tree) = tree(dirs) else {
        return Exit::Failed;
    };
    let mut held = chain == Exit::Done;
    let mut checkpoints = Vec::new();
    for path in &args.checkpoint {
        let Some(checkpoint) = read_text(path, Checkpoint::parse) else {
            held = false;
            continue;
        };
        let line = match tree.check_checkpoint(&checkpoint) {
            Ok(()) => format!(
                "the checkpoint holds: the log's first {} records hash to its root",
                checkpoint.size
            ),
            Err(e) => {
                held = false;
                format!("the checkpoint fails: {e}")
            }
        };
        println!("{}: {}", path.display(), escape_terminal(&line));
        checkpoints.push(checkpoint);
    }
    if let Some(path) = &args.proof {
        match read_text(path, Proof::parse) {
            Some(proof) => {
                let line = match tree.check_proof(&proof, &checkpoints) {
                    Ok(shown) => format!("the proof holds: {shown}"),
                    Err(e) => {
                        held = false;
                        format!("the proof fails: {e}")
                    }
                };
                println!("{}: {}", path.display(), escape_terminal(&line));
            }
            None => held = false,
        }
    }
    // The checkpoints that held: what the stops' windows are measured from.
    let mut sizes = Vec::new();
    if let Some(root) = &args.seal_root {
        let line = match check_seals(dirs, &tree, root) {
            Ok((line, sealed)) => {
                sizes.extend(sealed);
                line
            }
            Err(line) => {
                held = false;
                line
            }
        };
        println!("seals: {}", escape_terminal(&line));
    }
    if let Some(dir) = &args.witness {
        let line = match ledger::audit::check_witnessed(&tree, dir) {
            Ok(witnessed) => {
                sizes.extend(witnessed.cosigned.iter().map(|(size, _)| *size));
                witnessed.sentence()
            }
            Err(line) => {
                held = false;
                line
            }
        };
        println!("witness: {}", escape_terminal(&line));
    }
    if args.seal_root.is_some() || args.witness.is_some() {
        match ledger::audit::gaps(&dirs.audit_log(), &sizes) {
            Ok(stops) => {
                for line in stops {
                    println!("stops: {}", escape_terminal(&line));
                }
            }
            Err(e) => println!("stops: {}", escape_terminal(&e.to_string())),
        }
    }
    if held { Exit::Done } else { Exit::Failed }
}

/// Every sealed checkpoint: its seal from `root` through the epochs' certificates, then the
/// log against it. The sentence saying what held with the sealed sizes, or the first thing
/// that did not.
fn check_seals(dirs: &Dirs, tree: &LogTree, root: &str) -> Result<(String, Vec<u64>), String> {
    let root = ledger::audit::decode_hash(root)
        .ok_or("the root key must be 32 bytes in base64, as `bx audit seal init` printed it")?;
    let store = ledger::audit::SealStore::of(&dirs.state);
    let certs = store.certs().map_err(|e| e.to_string())?;
    let sealed = store.sealed().map_err(|e| e.to_string())?;
    let mut last = None;
    let mut sizes = Vec::new();
    for (at, (path, text)) in sealed.iter().enumerate() {
        let name = path.display();
        let (checkpoint, epoch) = ledger::audit::seal::verify_seal(text, &root, &certs)
            .map_err(|e| format!("{name}: the seal fails: {e}"))?;
        // One seal is one epoch: every epoch before the current key's has its checkpoint.
        if epoch != at as u64 + 1 {
            return Err(format!(
                "the sealed checkpoint of epoch {} is missing (removed): {name} is epoch {epoch}",
                at + 1
            ));
        }
        tree.check_checkpoint(&checkpoint)
            .map_err(|e| format!("{name} (epoch {epoch}): the sealed checkpoint fails: {e}"))?;
        last = Some((epoch, checkpoint.size));
        sizes.push(checkpoint.size);
    }
    let sealed_epochs = certs.len().saturating_sub(1);
    if sealed.len() < sealed_epochs {
        return Err(format!(
            "the sealed checkpoint of epoch {} is missing (removed): the keys reached epoch {}",
            sealed.len() + 1,
            certs.len()
        ));
    }
    match last {
        Some((epoch, size)) => Ok((
            format!(
                "{} sealed checkpoints hold, the last of epoch {epoch}: the log's first {size} records hash to its root",
                sealed.len()
            ),
            sizes,
        )),
        None => Err("no sealed checkpoint (bx audit seal now makes one)".to_string()),
    }
}

/// `bx audit seal init`.
pub fn seal_init(dirs: &Dirs) -> Exit {
    let Ok(tree) = tree(dirs) else {
        return Exit::Failed;
    };
    if tree.size() == 0 {
        eprintln!(
            "bx: the audit log is empty: start the broker once, so that its first record gives the log its id, then set sealing up"
        );
        return Exit::Failed;
    }
    match ledger::audit::SealStore::of(&dirs.state).init(tree.origin()) {
        Ok(root) => {
            println!("{}", ledger::audit::encode_hash(&root));
            eprintln!(
                "bx: sealing is set up in {}; the line above is the root public key, printed this once: keep it off this machine (bx audit verify --seal-root KEY)",
                dirs.state.join(ledger::audit::SEAL_DIR).display()
            );
            Exit::Done
        }
        Err(e) => {
            eprintln!("bx: {}", escape_terminal(&e.to_string()));
            Exit::Failed
        }
    }
}

/// `bx audit seal now`.
pub fn seal_now(dirs: &Dirs) -> Exit {
    let Ok(tree) = tree(dirs) else {
        return Exit::Failed;
    };
    let sealed = tree
        .checkpoint(None)
        .map_err(|e| e.to_string())
        .and_then(|c| {
            ledger::audit::SealStore::of(&dirs.state)
                .seal_now(&c)
                .map_err(|e| e.to_string())
        });
    match sealed {
        Ok(path) => {
            println!("{}", path.display());
            Exit::Done
        }
        Err(e) => {
            eprintln!("bx: {}", escape_terminal(&e));
            Exit::Failed
        }
    }
}
