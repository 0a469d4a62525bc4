//! The broker's checkpoints of its audit log (issue 36, items 2 and 3): every
//! `[audit] seal_interval_secs` and at stop, the log's checkpoint is sealed (when
//! `bx audit seal init` set sealing up) and sent to the witness (when `[audit] witness`
//! names one), whose cosignature is kept in the state folder's `witness/`. At stop the
//! witness is waited for at most `witness_wait_ms`.
//!
//! ```toml
//! [audit]
//! seal_interval_secs = 600         # how often to checkpoint (seal, send to the witness)
//! witness = "unix:/run/w/witness.sock"  # a `bx audit witness --socket` (optional)
//! witness_wait_ms = 5000           # the longest an exchange with the witness may take
//! ```

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ledger::audit::witness_wire::{WitnessError, exchange, keep_cosigned};
use ledger::audit::{LogTree, SealStore, origin_of};
use serde::Deserialize;

/// `[audit]`: how the broker checkpoints its log.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Seconds between two checkpoints (each sealed and sent to the witness): the longest a
    /// record stays open to an unnoticed rewrite while the broker runs.
    pub seal_interval_secs: u64,
    /// The witness: `unix:PATH`, the socket of a `bx audit witness`.
    pub witness: Option<String>,
    /// The longest one exchange with the witness may take, in milliseconds (at stop too).
    pub witness_wait_ms: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            seal_interval_secs: 600,
            witness: None,
            witness_wait_ms: 5000,
        }
    }
}

impl AuditConfig {
    /// Whether the values make sense, naming the one that does not.
    pub fn check(&self) -> Result<(), String> {
        if self.seal_interval_secs == 0 || self.witness_wait_ms == 0 {
            return Err(format!(
                "[audit] seal_interval_secs and witness_wait_ms must be more than 0 (they are {} and {})",
                self.seal_interval_secs, self.witness_wait_ms
            ));
        }
        if let Some(witness) = &self.witness
            && self.witness_socket().is_none()
        {
            return Err(format!(
                "[audit] witness {witness:?} must be unix: and an absolute path (unix:/run/w/witness.sock)"
            ));
        }
        Ok(())
    }

    /// The witness's socket.
    pub fn witness_socket(&self) -> Option<PathBuf> {
        self.witness
            .as_deref()?
            .strip_prefix("unix:")
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    }

    /// The interval between two checkpoints.
    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.seal_interval_secs)
    }

    /// Whether the broker checkpoints the log of `state` at all: sealing set up, or a witness.
    pub fn checkpoints(&self, state: &Path) -> bool {
        self.witness.is_some() || SealStore::of(state).is_set_up()
    }
}

/// What one checkpoint did.
#[derive(Debug, Default)]
pub struct Checkpointed {
    /// The sealed checkpoint's file.
    pub sealed: Option<PathBuf>,
    /// The witness's cosignature, kept in the state folder's `witness/`.
    pub cosigned: Option<PathBuf>,
}

/// One checkpoint at a time (the interval's and the stop's).
static CHECKPOINTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Checkpoints the log of `state` now: sealed when sealing is set up, sent to the witness
/// when there is one. Failures are logged; the broker goes on.
pub fn checkpoint_now(state: &Path, config: &AuditConfig) -> Checkpointed {
    let _one = CHECKPOINTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut done = Checkpointed::default();
    if !config.checkpoints(state) {
        return done;
    }
    let log = state.join(proto::dirs::AUDIT_FILE);
    let tree = match LogTree::read(&log, origin_of(state)) {
        Ok(tree) => tree,
        Err(e) => {
            tracing::error!("the audit log could not be checkpointed: {e}");
            return done;
        }
    };
    let store = SealStore::of(state);
    if store.is_set_up() {
        match tree
            .checkpoint(None)
            .map_err(|e| e.to_string())
            .and_then(|c| store.seal_now(&c).map_err(|e| e.to_string()))
        {
            Ok(path) => done.sealed = Some(path),
            Err(e) => tracing::error!("the audit log could not be sealed: {e}"),
        }
    }
    if let Some(socket) = config.witness_socket() {
        match witness(&socket, &tree, config, state) {
            Ok(path) => done.cosigned = Some(path),
            Err(e) => {
                tracing::error!(witness = %socket.display(), "the audit log's checkpoint was not cosigned: {e}")
            }
        }
    }
    done
}

/// Sends the checkpoint of `tree` to the witness at `socket` and keeps its cosignature.
fn witness(
    socket: &Path,
    tree: &LogTree,
    config: &AuditConfig,
    state: &Path,
) -> Result<PathBuf, String> {
    let wait = Some(Duration::from_millis(config.witness_wait_ms));
    let stream = UnixStream::connect(socket)
        .map_err(|e| WitnessError::Unreachable(e.to_string()).to_string())?;
    stream
        .set_read_timeout(wait)
        .and_then(|()| stream.set_write_timeout(wait))
        .map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let (checkpoint, note) = exchange(&mut reader, &mut writer, tree).map_err(|e| e.to_string())?;
    keep_cosigned(state, &checkpoint, &note)
}

/// Checkpoints every interval, from the first interval on.
pub async fn checkpoint_every(state: PathBuf, config: AuditConfig) {
    let mut ticks = tokio::time::interval(config.interval());
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let (state, config) = (state.clone(), config.clone());
        let done = tokio::task::spawn_blocking(move || checkpoint_now(&state, &config)).await;
        if let Ok(done) = done {
            if let Some(path) = done.sealed {
                tracing::info!(checkpoint = %path.display(), "sealed the audit log");
            }
            if let Some(path) = done.cosigned {
                tracing::info!(cosigned = %path.display(), "the witness cosigned the audit log");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_section_reads_its_keys_and_names_a_bad_one() {
        let config: AuditConfig = toml::from_str("").unwrap();
        assert_eq!(config, AuditConfig::default());
        assert_eq!(config.interval(), Duration::from_secs(600));
        let config: AuditConfig =
            toml::from_str("seal_interval_secs = 5\nwitness = \"unix:/run/w.sock\"\n").unwrap();
        assert_eq!(config.interval(), Duration::from_secs(5));
        assert_eq!(config.witness_socket(), Some(PathBuf::from("/run/w.sock")));
        assert!(config.check().is_ok());
        for (text, named) in [
            ("witness = \"unix:w.sock\"", "witness"),
            ("witness = \"/run/w.sock\"", "witness"),
            ("witness_wait_ms = 0", "witness_wait_ms"),
        ] {
            let config: AuditConfig = toml::from_str(text).unwrap();
            let error = config.check().unwrap_err();
            assert!(error.contains(named), "{text}: {error}");
        }
    }
}
