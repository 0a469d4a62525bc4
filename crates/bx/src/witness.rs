//! `bx audit witness --dir DIR --socket PATH`: a witness of audit logs, the process the owner
//! runs apart from the broker (another uid, or a folder only it can write), serving one
//! connection at a time on a unix socket; and `bx audit cosign --witness unix:PATH`, which
//! sends the log's checkpoint to a witness as the broker does at each seal.
//!
//! What it checks and keeps is `ledger::audit::witness`; what travels, `witness_wire`. It
//! prints its public key first (`witness key <base64>`), then one line per checkpoint it
//! cosigns or refuses, saying why.

use std::io::{BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::Args;
use ledger::audit::witness::WitnessDir;
use ledger::audit::witness_wire::{Reply, Request, answer, exchange, keep_cosigned, read_line};
use proto::dirs::Dirs;
use proto::text::escape_terminal;

use crate::Exit;

/// How long one connection may stay silent before the witness closes it.
const SILENCE: Duration = Duration::from_secs(30);

/// `bx audit witness`'s options.
#[derive(Args, Clone, Debug)]
pub struct WitnessArgs {
    /// The folder where the witness keeps its key and what it cosigned (made 0700).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The unix socket it listens on (a stale one left by a witness that stopped is
    /// replaced; one another witness answers on is refused).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
}

/// Binds `path`, replacing a socket no process answers on.
fn bind(path: &Path) -> Result<UnixListener, String> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "{} exists and is not a socket: not replaced",
                path.display()
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{}: another witness answers on this socket",
                path.display()
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    UnixListener::bind(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `bx audit witness --dir DIR --socket PATH`: serves until killed.
pub fn serve(args: &WitnessArgs) -> Exit {
    let started = WitnessDir::open(&args.dir).and_then(|w| bind(&args.socket).map(|l| (w, l)));
    let (witness, listener) = match started {
        Ok(started) => started,
        Err(e) => {
            eprintln!("bx: {}", escape_terminal(&e));
            return Exit::Failed;
        }
    };
    println!(
        "witness key {}",
        ledger::audit::encode_hash(&witness.public())
    );
    eprintln!(
        "bx audit witness: listening on {}, keeping what it cosigns in {}",
        args.socket.display(),
        args.dir.display()
    );
    let _ = std::io::stdout().flush();
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                if let Err(e) = connection(&witness, stream) {
                    eprintln!("bx audit witness: a connection failed: {e}");
                }
            }
            Err(e) => eprintln!("bx audit witness: accept failed: {e}"),
        }
    }
    Exit::Done
}

/// One connection: requests answered in turn until it closes.
fn connection(witness: &WitnessDir, stream: UnixStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(SILENCE))?;
    stream.set_write_timeout(Some(SILENCE))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    while let Some(line) = read_line(&mut reader)? {
        let time = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let reply = match serde_json::from_slice::<Request>(&line) {
            Ok(request) => {
                let reply = answer(witness, &request, time);
                say(&request, &reply);
                reply
            }
            Err(e) => Reply::Refused {
                why: format!("not a witness request: {e}"),
            },
        };
        let mut out = serde_json::to_vec(&reply).map_err(std::io::Error::other)?;
        out.push(b'\n');
        writer.write_all(&out)?;
    }
    Ok(())
}

/// One line on standard output for each checkpoint cosigned or refused.
fn say(request: &Request, reply: &Reply) {
    let Request::Submit { checkpoint, .. } = request else {
        return;
    };
    let mut lines = checkpoint.lines();
    let (origin, size) = (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    );
    let line = match reply {
        Reply::Cosigned { .. } => format!("cosigned {origin} at {size} records"),
        Reply::Refused { why } => format!("refused {origin} at {size} records: {why}"),
        Reply::Latest { .. } => return,
    };
    println!("{}", escape_terminal(&line));
    let _ = std::io::stdout().flush();
}

/// `bx audit cosign --witness unix:PATH`: the log's checkpoint sent to the witness now, its
/// cosignature kept in the state folder's `witness/` (as the broker keeps them).
pub fn cosign(dirs: &Dirs, witness: &str) -> Exit {
    let Some(socket) = witness
        .strip_prefix("unix:")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    else {
        eprintln!("bx: --witness must be unix: and an absolute path (unix:/run/w/witness.sock)");
        return Exit::Usage;
    };
    let Ok(tree) = crate::audit::tree(dirs) else {
        return Exit::Failed;
    };
    let sent = UnixStream::connect(&socket)
        .and_then(|stream| {
            stream.set_read_timeout(Some(SILENCE))?;
            Ok((stream.try_clone()?, stream))
        })
        .map_err(|e| format!("{}: {e}", socket.display()))
        .and_then(|(mut writer, stream)| {
            exchange(&mut BufReader::new(stream), &mut writer, &tree).map_err(|e| e.to_string())
        })
        .and_then(|(checkpoint, note)| keep_cosigned(&dirs.state, &checkpoint, &note));
    match sent {
        Ok(path) => {
            println!("{}", escape_terminal(&path.display().to_string()));
            Exit::Done
        }
        Err(e) => {
            eprintln!("bx: {}", escape_terminal(&e));
            Exit::Failed
        }
    }
}
