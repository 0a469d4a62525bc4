//! Where sealing keeps its files, in the state folder's `seal/` (all 0600):
//!
//! - `epoch.key`: the current epoch's signing key and its certificate. Sealing replaces it
//!   with the next epoch's: the next key is written beside it (`epoch.new`, fsynced), the old
//!   file's bytes are overwritten with zeros in place and fsynced, then the new file is renamed
//!   over it. In memory the key's PKCS#8 bytes and its file's text are zeroed when dropped
//!   (`zeroize`); `ring`'s key pair does not zero its own copy. Erasure is as good as the
//!   filesystem's in-place writes: a copy-on-write or data-journalling filesystem, or an SSD's
//!   remapping, may keep the old blocks.
//! - `certs`: every epoch's certificate, one a line, from epoch 1.
//! - `checkpoints/<size>.e<epoch>`: each sealed checkpoint.
//!
//! One seal is one epoch: [`SealStore::seal_now`] seals the checkpoint with the current key,
//! then evolves it.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use super::checkpoint::Checkpoint;
use super::seal::{self, EpochCert, PublicKey, SealError, SealKey};
use super::tree::{LogTree, origin_of};

/// The folder, under the state folder.
pub const SEAL_DIR: &str = "seal";

/// Why sealing's files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SealStoreError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A key, certificate or seal that does not hold.
    #[error("{path}: {error}")]
    Seal {
        /// The file.
        path: String,
        /// What is wrong.
        error: SealError,
    },
    /// `init` on a folder that already seals.
    #[error(
        "{0} already holds a seal key: sealing was set up before (its root key was printed then)"
    )]
    Exists(String),
}

/// The `seal/` folder of one state folder.
#[derive(Debug, Clone)]
pub struct SealStore {
    dir: PathBuf,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SealStoreError + '_ {
    move |source| SealStoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn seal_error(path: &Path) -> impl Fn(SealError) -> SealStoreError + '_ {
    move |error| SealStoreError::Seal {
        path: path.display().to_string(),
        error,
    }
}

/// Writes `text` to `path` (0600) through a file beside it, fsynced and renamed over it.
fn replace(path: &Path, text: &str) -> Result<(), SealStoreError> {
    let fresh = write_beside(path, text)?;
    rename_over(&fresh, path)
}

/// Writes `text` to `path`'s `.new` file (0600), fsynced; returns that file.
fn write_beside(path: &Path, text: &str) -> Result<PathBuf, SealStoreError> {
    let fresh = path.with_extension("new");
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&fresh)
        .map_err(io(&fresh))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io(&fresh))?;
    Ok(fresh)
}

/// Renames `fresh` over `path` and syncs their folder.
fn rename_over(fresh: &Path, path: &Path) -> Result<(), SealStoreError> {
    fs::rename(fresh, path).map_err(io(path))?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
    }
    Ok(())
}

/// Overwrites every byte of the file `path` with zeros in place (same file, no truncation)
/// and fsyncs it, so that the key it held is not left in its blocks when it is replaced. A
/// missing file is nothing to erase.
fn erase_in_place(path: &Path) -> Result<(), SealStoreError> {
    let mut file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path)(e)),
    };
    let len = file.metadata().map_err(io(path))?.len();
    let zeros = [0u8; 4096];
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n]).map_err(io(path))?;
        left -= n as u64;
    }
    file.sync_all().map_err(io(path))
}

impl SealStore {
    /// The seal folder of the state folder `state`.
    pub fn of(state: &Path) -> SealStore {
        SealStore {
            dir: state.join(SEAL_DIR),
        }
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join("epoch.key")
    }

    fn certs_path(&self) -> PathBuf {
        self.dir.join("certs")
    }

    fn checkpoints_dir(&self) -> PathBuf {
        self.dir.join("checkpoints")
    }

    /// Sets up sealing for the log `origin`: epoch 1's key and certificate written, the root
    /// public key returned (to print once; it is written nowhere). Refuses a folder that
    /// already seals.
    pub fn init(&self, origin: &str) -> Result<PublicKey, SealStoreError> {
        let key_path = self.key_path();
        if key_path.exists() {
            return Err(SealStoreError::Exists(key_path.display().to_string()));
        }
        fs::create_dir_all(self.checkpoints_dir()).map_err(io(&self.dir))?;
        let (root, key, cert) = seal::init(origin).map_err(seal_error(&key_path))?;
        replace(&self.certs_path(), "")?;
        self.write_key(&key, &cert)?;
        self.append_cert(&cert)?;
        Ok(root)
    }

    /// Writes `key` as the current key: beside the key file first (fsynced), then the old
    /// key's bytes overwritten in place, then renamed over it.
    fn write_key(&self, key: &SealKey, cert: &EpochCert) -> Result<(), SealStoreError> {
        let path = self.key_path();
        let text = Zeroizing::new(format!("{}{}\n", key.to_text().as_str(), cert.to_line()));
        let fresh = write_beside(&path, &text)?;
        erase_in_place(&path)?;
        rename_over(&fresh, &path)
    }

    /// Finishes a key replacement a stop interrupted: a complete next key beside the key
    /// file replaces it (the old one erased first); an incomplete one is erased and removed.
    fn finish_key_replacement(&self) -> Result<(), SealStoreError> {
        let path = self.key_path();
        let fresh = path.with_extension("new");
        let text = match fs::read_to_string(&fresh) {
            Ok(text) => Zeroizing::new(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&fresh)(e)),
        };
        let complete = SealKey::from_text(&text).is_ok()
            && text
                .lines()
                .nth(3)
                .is_some_and(|line| EpochCert::from_line(line).is_ok());
        if complete {
            erase_in_place(&path)?;
            rename_over(&fresh, &path)
        } else {
            erase_in_place(&fresh)?;
            fs::remove_file(&fresh).map_err(io(&fresh))
        }
    }

    fn append_cert(&self, cert: &EpochCert) -> Result<(), SealStoreError> {
        let path = self.certs_path();
        let mut file = OpenOptions::new()
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        file.write_all(format!("{}\n", cert.to_line()).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io(&path))
    }

    /// Every epoch's certificate, in order.
    pub fn certs(&self) -> Result<Vec<EpochCert>, SealStoreError> {
        let path = self.certs_path();
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        text.lines()
            .map(|line| EpochCert::from_line(line).map_err(seal_error(&path)))
            .collect()
    }

    /// The current key; a key replacement a stop interrupted is finished, and a certificate
    /// the key file holds that `certs` lacks (a stop between the two writes) appended, first.
    fn key(&self) -> Result<SealKey, SealStoreError> {
        self.finish_key_replacement()?;
        let path = self.key_path();
        let text = Zeroizing::new(fs::read_to_string(&path).map_err(io(&path))?);
        let key = SealKey::from_text(&text).map_err(seal_error(&path))?;
        let cert_line = text.lines().nth(3).unwrap_or_default();
        let cert = EpochCert::from_line(cert_line).map_err(seal_error(&path))?;
        if self.certs()?.last().map(|c| c.epoch) != Some(key.epoch()) {
            self.append_cert(&cert)?;
        }
        Ok(key)
    }

    /// Seals `checkpoint` with the current epoch's key, keeps it in `checkpoints/`, then
    /// evolves the key (the next epoch's key and certificate replace it). Returns the file.
    pub fn seal_now(&self, checkpoint: &Checkpoint) -> Result<PathBuf, SealStoreError> {
        let key = self.key()?;
        let path = self
            .checkpoints_dir()
            .join(format!("{}.e{}", checkpoint.size, key.epoch()));
        replace(&path, &key.seal(checkpoint))?;
        let (next, cert) = key.evolve().map_err(seal_error(&self.key_path()))?;
        self.write_key(&next, &cert)?;
        self.append_cert(&cert)?;
        Ok(path)
    }

    /// Whether sealing was set up here (`bx audit seal init`).
    pub fn is_set_up(&self) -> bool {
        self.key_path().exists()
    }

    /// Every sealed checkpoint's file and text, oldest epoch first.
    pub fn sealed(&self) -> Result<Vec<(PathBuf, String)>, SealStoreError> {
        let dir = self.checkpoints_dir();
        let mut found = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io(&dir))? {
            let path = entry.map_err(io(&dir))?.path();
            let epoch = path
                .extension()
                .and_then(|e| e.to_str())
                .and_then(|e| e.strip_prefix('e'))
                .and_then(|e| e.parse::<u64>().ok());
            if let Some(epoch) = epoch {
                let text = fs::read_to_string(&path).map_err(io(&path))?;
                found.push((epoch, path, text));
            }
        }
        found.sort_by_key(|(epoch, _, _)| *epoch);
        Ok(found.into_iter().map(|(_, p, t)| (p, t)).collect())
    }
}

/// Seals the log of the state folder `state` now (its complete records), when sealing is set
/// up there: what the broker does at an interval and at stop. `None` when it is not set up.
pub fn seal_if_set_up(state: &Path) -> Result<Option<PathBuf>, SealStoreError> {
    let store = SealStore::of(state);
    if !store.is_set_up() {
        return Ok(None);
    }
    let log = state.join(proto::dirs::AUDIT_FILE);
    let tree = LogTree::read(&log, origin_of(state)).map_err(|e| SealStoreError::Io {
        path: log.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let checkpoint = tree.checkpoint(None).map_err(|e| SealStoreError::Io {
        path: log.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    store.seal_now(&checkpoint).map(Some)
}
