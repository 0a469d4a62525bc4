//! Writing the log: open (cutting a torn last line), append a batch with one fsync, and start a
//! new segment after a break when the owner asks for it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use proto::Timestamp;

use super::verify::{Anchor, scan, scan_until_break};
use super::{AuditError, Event, Record, sha256_hex};

/// The open audit log, positioned after its last record.
#[derive(Debug)]
pub struct AuditLog {
    file: File,
    path: PathBuf,
    /// Device and inode of `file`: what `path` must still name before each append.
    identity: (u64, u64),
    /// The file's length, which only this log changes (the broker holds its lock): where a
    /// failed append cuts back to.
    len: u64,
    last_seq: u64,
    last_hash: String,
}

/// What opening the log found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Complete records found.
    pub records: u64,
    /// The torn last line that was cut: its offset and length.
    pub cut: Option<(u64, u64)>,
    /// The file that now holds a broken previous segment, when a new one was started.
    pub previous_segment: Option<PathBuf>,
}

impl AuditLog {
    /// Opens (or creates, mode 0600) the log at `path`. The chain is checked against `anchor`
    /// (the ledger's last record); a torn last line is cut and the cut recorded; any other
    /// break is [`AuditError::Broken`] and nothing is written.
    pub fn open(
        path: &Path,
        anchor: Option<&Anchor>,
        now: Timestamp,
    ) -> Result<(AuditLog, Opened), AuditError> {
        let (file, bytes) = open_file(path)?;
        let scan = scan(&bytes, anchor).map_err(|broken| AuditError::Broken {
            path: path.display().to_string(),
            broken,
        })?;
        let mut opened = Opened {
            records: scan.summary.records,
            cut: None,
            previous_segment: None,
        };
        if scan.summary.partial.is_some() {
            file.set_len(scan.complete_len)
                .and_then(|()| file.sync_data())
                .map_err(|e| io(path, e))?;
        }
        let mut log = AuditLog::of(
            file,
            path,
            scan.summary.last_seq,
            scan.summary.last_hash.clone(),
        )?;
        if let Some((offset, length)) = scan.summary.partial {
            // Invariant: `scan` found the partial line in these very bytes, starting at `offset`.
            let torn = &bytes[offset as usize..];
            let digest = sha256_hex(torn);
            log.append(
                &[Event::Cut {
                    offset,
                    bytes: length,
                    sha256: digest,
                }],
                now,
            )?;
            opened.cut = Some((offset, length));
        }
        Ok((log, opened))
    }

    /// Opens the log at `path`, and when its chain is broken (other than a torn last line),
    /// moves the file aside to `<path>.broken-<ms>` and starts a new one whose first record
    /// names the break and continues the numbering and the hash of the last good record. The
    /// owner asks for this explicitly; the broken file is kept for inspection.
    pub fn open_new_segment(
        path: &Path,
        anchor: Option<&Anchor>,
        now: Timestamp,
    ) -> Result<(AuditLog, Opened), AuditError> {
        let (_, bytes) = open_file(path)?;
        let stopped = match scan_until_break(&bytes, anchor) {
            Ok(_) => return AuditLog::open(path, anchor, now),
            Err(stopped) => stopped,
        };
        let aside = PathBuf::from(format!("{}.broken-{}", path.display(), now.as_millis()));
        std::fs::rename(path, &aside).map_err(|e| io(path, e))?;
        let (file, _) = open_file(path)?;
        let mut log = AuditLog::of(
            file,
            path,
            stopped.last_good_seq,
            stopped.last_good_hash.clone(),
        )?;
        log.append(
            &[Event::Segment {
                previous_file: aside.display().to_string(),
                break_found: stopped.broken.to_string(),
                previous_hash: stopped.last_good_hash,
            }],
            now,
        )?;
        Ok((
            log,
            Opened {
                records: 1,
                cut: None,
                previous_segment: Some(aside),
            },
        ))
    }

    /// The log of the open `file` at `path`, its chain ending at `last_seq` and `last_hash`.
    fn of(
        file: File,
        path: &Path,
        last_seq: u64,
        last_hash: String,
    ) -> Result<AuditLog, AuditError> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().map_err(|e| io(path, e))?;
        Ok(AuditLog {
            file,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            len: meta.len(),
            last_seq,
            last_hash,
        })
    }

    /// Appends `events` as consecutive records with one write and one fsync, and returns the
    /// anchor of the last. On failure nothing is kept: the file is cut back to where it was.
    pub fn append(&mut self, events: &[Event], now: Timestamp) -> Result<Anchor, AuditError> {
        self.append_records(events, now)?;
        Ok(self.anchor())
    }

    /// [`AuditLog::append`], returning each record written with the hash of its line (what
    /// [`crate::Ledger::apply`] takes).
    pub fn append_records(
        &mut self,
        events: &[Event],
        now: Timestamp,
    ) -> Result<Vec<(Record, String)>, AuditError> {
        let mut written = Vec::with_capacity(events.len());
        let mut batch = Vec::new();
        let mut seq = self.last_seq;
        let mut hash = self.last_hash.clone();
        for event in events {
            seq += 1;
            let record = Record {
                seq,
                at: now,
                prev: hash,
                event: event.clone(),
            };
            let line =
                serde_json::to_vec(&record).map_err(|e| AuditError::Encode(e.to_string()))?;
            hash = sha256_hex(&line);
            batch.extend_from_slice(&line);
            batch.push(b'\n');
            written.push((record, hash.clone()));
        }
        self.check_still_at_path()?;
        let synced = self
            .file
            .write_all(&batch)
            .and_then(|()| self.file.sync_data());
        if let Err(error) = synced {
            let _ = self.file.set_len(self.len);
            return Err(io(&self.path, error));
        }
        self.len += batch.len() as u64;
        self.last_seq = seq;
        self.last_hash = hash;
        Ok(written)
    }

    /// The log must still be the file at its path: a log moved, deleted or replaced (by a
    /// link to a device, say) is not written behind the owner's back.
    fn check_still_at_path(&self) -> Result<(), AuditError> {
        use std::os::unix::fs::MetadataExt;
        let replaced = match std::fs::metadata(&self.path) {
            Ok(now) => (now.dev(), now.ino()) != self.identity,
            Err(_) => true,
        };
        if replaced {
            return Err(io(
                &self.path,
                std::io::Error::other("the log was moved, deleted or replaced since it was opened"),
            ));
        }
        Ok(())
    }

    /// The last record written: what the ledger records once the append returned.
    pub fn anchor(&self) -> Anchor {
        Anchor {
            seq: self.last_seq,
            hash: self.last_hash.clone(),
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open_file(path: &Path) -> Result<(File, Vec<u8>), AuditError> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io(path, e))?;
    // A device or a pipe where the log should be (/dev/full, /dev/zero) would never end.
    let meta = file.metadata().map_err(|e| io(path, e))?;
    if !meta.is_file() {
        return Err(io(path, std::io::Error::other("it is not a regular file")));
    }
    // Made 0600; one an older install left wider is narrowed.
    crate::private::narrow(path).map_err(|e| io(path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| io(path, e))?;
    Ok((file, bytes))
}

fn io(path: &Path, source: std::io::Error) -> AuditError {
    AuditError::Io {
        path: path.display().to_string(),
        source,
    }
}
