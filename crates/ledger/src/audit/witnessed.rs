//! The log checked against a witness's folder (`bx audit verify --witness DIR`): from the log
//! and DIR alone, so a state folder whose every file was replaced is still checked. Every
//! cosignature is checked with the witness's key (`DIR/witness.pub`), every cosigned
//! checkpoint against the leaves the witness kept, and then the log's records one by one
//! against those leaves: the answer names the first record that no longer matches.

use std::fs::{self, File};
use std::io::{BufReader, Read};
use std::path::Path;

use super::checkpoint::ORIGIN_PREFIX;
use super::merkle::Frontier;
use super::tree::LogTree;
use super::witness::{decode_public, id_of_origin, verify_cosigned};

/// A log that matches what the witness cosigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witnessed {
    /// The sizes of the checkpoints the witness cosigned for this log, each with when (Unix
    /// seconds), smallest first.
    pub cosigned: Vec<(u64, u64)>,
    /// The records the log holds.
    pub records: u64,
}

impl Witnessed {
    /// The sentence `verify` prints.
    pub fn sentence(&self) -> String {
        let (size, time) = self.cosigned.last().copied().unwrap_or_default();
        format!(
            "the log's first {size} records match the {} checkpoints the witness cosigned, the last at {} (Unix {time}); {} records were written after it",
            self.cosigned.len(),
            rfc3339(time),
            self.records.saturating_sub(size)
        )
    }
}

/// Unix seconds as the audit log writes times.
pub fn rfc3339(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| proto::Timestamp::from_millis(s.saturating_mul(1000)).ok())
        .map_or_else(|| format!("{seconds} s"), |t| t.to_rfc3339())
}

/// Checks the log `tree` against the witness folder `dir`. The error is a sentence naming
/// what does not hold: the first record that no longer matches, records deleted, a
/// cosignature that is not the witness's, or a folder that holds another log.
pub fn check_witnessed(tree: &LogTree, dir: &Path) -> Result<Witnessed, String> {
    let pub_path = dir.join("witness.pub");
    let public = fs::read_to_string(&pub_path)
        .ok()
        .and_then(|text| decode_public(&text))
        .ok_or_else(|| {
            format!(
                "{}: no witness key there (is DIR the folder `bx audit witness --dir` keeps?)",
                pub_path.display()
            )
        })?;
    let logs = dir.join("logs");
    let mut ids: Vec<String> = fs::read_dir(&logs)
        .map_err(|e| format!("{}: {e}", logs.display()))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    ids.sort();
    let own = id_of_origin(tree.origin()).map(str::to_string);
    let (id, renamed) = match own.filter(|id| ids.contains(id)) {
        Some(id) => (id, false),
        // The log's id comes from its first record: a witness of one log, shown a log whose
        // id it does not know, compares the two, and the answer names record 1.
        None if ids.len() == 1 => (ids[0].clone(), true),
        None if ids.is_empty() => return Err("the witness has cosigned no log yet".to_string()),
        None => {
            return Err(format!(
                "the witness holds no checkpoint of this log ({}), only of {}: its first record was rewritten, or the witness never saw it",
                tree.origin(),
                ids.join(", ")
            ));
        }
    };
    let folder = logs.join(&id);
    let origin = format!("{ORIGIN_PREFIX}{id}");
    let mut cosigned = Vec::new();
    let entries =
        fs::read_dir(folder.join("cosigned")).map_err(|e| format!("{}: {e}", folder.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (checkpoint, time) =
            verify_cosigned(&text, &public).map_err(|e| format!("{}: {e}", path.display()))?;
        if checkpoint.origin != origin {
            return Err(format!(
                "{}: it is cosigned for another log ({}), not the log this folder keeps ({origin})",
                path.display(),
                checkpoint.origin
            ));
        }
        cosigned.push((checkpoint.size, time, checkpoint.root));
    }
    cosigned.sort_by_key(|(size, _, _)| *size);
    let last = cosigned.last().map_or(0, |(size, _, _)| *size);
    // One pass over the witness's leaves: each cosigned root made from them, and the log's
    // records compared with them.
    let leaves_path = folder.join("leaves");
    let file = File::open(&leaves_path).map_err(|e| format!("{}: {e}", leaves_path.display()))?;
    let mut reader = BufReader::new(file);
    let mut frontier = Frontier::default();
    let mut first_change: Option<u64> = None;
    let mut next = cosigned.iter().peekable();
    let mut leaf = [0u8; 32];
    for index in 0..last {
        reader.read_exact(&mut leaf).map_err(|e| {
            format!(
                "{}: the witness's leaves end before record {}: {e}",
                leaves_path.display(),
                index + 1
            )
        })?;
        frontier.push(leaf);
        if first_change.is_none() && tree.leaves().get(index as usize) != Some(&leaf) {
            first_change = Some(index);
        }
        while let Some((size, _, root)) = next.next_if(|(size, _, _)| *size == index + 1) {
            if frontier.root() != *root {
                return Err(format!(
                    "the witness's own record is damaged: its leaves do not make its checkpoint of {size} records"
                ));
            }
        }
    }
    let covering = |index: u64| {
        cosigned
            .iter()
            .find(|(size, _, _)| *size > index)
            .map_or((last, 0), |(size, time, _)| (*size, *time))
    };
    if let Some(index) = first_change {
        let (size, time) = covering(index);
        if index >= tree.size() {
            return Err(format!(
                "records deleted: the log holds {} records, but the witness cosigned {size} at {} (records {} to {size} are gone: the tail cut, or the log rolled back to an older checkpoint)",
                tree.size(),
                rfc3339(time),
                tree.size() + 1
            ));
        }
        let record = index + 1;
        let renamed = if renamed && index == 0 {
            format!(
                " (the log's id is now {}, the witness knows it as {origin})",
                tree.origin()
            )
        } else {
            String::new()
        };
        return Err(format!(
            "record {record} (line {record}) no longer matches the record the witness cosigned in its checkpoint of {size} records at {}{renamed}: it was changed, removed or moved after that checkpoint, even if the chain was recomputed",
            rfc3339(time)
        ));
    }
    Ok(Witnessed {
        cosigned: cosigned.iter().map(|(s, t, _)| (*s, *t)).collect(),
        records: tree.size(),
    })
}
