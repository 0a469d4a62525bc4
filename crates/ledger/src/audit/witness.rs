//! The witness's side (issue 36, item 3): a folder that only the witness writes, holding for
//! each log it follows every checkpoint it cosigned and the leaf hash of every record those
//! checkpoints cover; its own Ed25519 key (through `ring`, as the seals); and the check it
//! makes before it cosigns. Nothing here opens a socket: `bx audit witness` serves this over
//! one, and [`super::witness_wire`] is what travels.
//!
//! The folder (`bx audit witness --dir DIR`), every file 0600 in folders of 0700:
//!
//! - `witness.key`: the witness's signing key (PKCS#8, base64); `witness.pub` its public key.
//! - `logs/<log id>/leaves`: 32 bytes a record, the leaf hashes of every record cosigned.
//! - `logs/<log id>/cosigned/<size>`: each cosigned checkpoint: the checkpoint's text, an
//!   empty line, and `— boxmaker-witness <base64 of the time (8 bytes, big-endian Unix
//!   seconds) and the signature over "boxmaker witness cosignature\ntime T\n" and the text>`.
//!
//! A checkpoint is cosigned only when it names a log by its id (`boxmaker audit ` and 32 hex
//! digits), is not older than the last one cosigned for that log, carries a consistency proof
//! from it that holds, and comes with the leaf hashes of its new records, which must make its
//! root. The leaves are what lets `bx audit verify --witness DIR` name the first record that
//! no longer matches, where a root alone says only that one of them changed.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use super::checkpoint::{Checkpoint, ORIGIN_PREFIX, Proof, encode_hash};
use super::merkle::{self, Frontier, Hash};
use super::seal::PublicKey;

/// The cosignature line's key name.
pub const WITNESS_NAME: &str = "boxmaker-witness";

/// The witness's folder.
#[derive(Debug)]
pub struct WitnessDir {
    dir: PathBuf,
    key: Ed25519KeyPair,
    public: PublicKey,
}

/// What the witness holds for one log: its last cosigned checkpoint and the frontier of the
/// records it covers.
struct Followed {
    folder: PathBuf,
    last: Option<Checkpoint>,
    frontier: Frontier,
}

/// The log id an origin names, when it names one as a witness keeps it.
pub fn id_of_origin(origin: &str) -> Option<&str> {
    origin
        .strip_prefix(ORIGIN_PREFIX)
        .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .filter(|id| !id.bytes().any(|b| b.is_ascii_uppercase()))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Makes `path` and the folders above it, 0700.
pub(super) fn private_dir(path: &Path) -> Result<(), String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(io(path))
}

/// Writes `bytes` to `path` (0600), replacing what was there, synced.
pub(super) fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io(path))
}

/// The bytes a cosignature signs.
fn cosigned_message(time: u64, body: &str) -> Vec<u8> {
    format!("boxmaker witness cosignature\ntime {time}\n{body}").into_bytes()
}

/// Checks a cosigned checkpoint's text against the witness's public key: the checkpoint and
/// when it was cosigned (Unix seconds).
pub fn verify_cosigned(text: &str, public: &PublicKey) -> Result<(Checkpoint, u64), String> {
    let (body, line) = text
        .split_once("\n\n")
        .ok_or("no empty line before the cosignature")?;
    let body = format!("{body}\n");
    let checkpoint = Checkpoint::parse(&body).map_err(|e| e.to_string())?;
    let encoded = line
        .trim_end_matches('\n')
        .strip_prefix(&format!("— {WITNESS_NAME} "))
        .ok_or_else(|| format!("the cosignature line must start `— {WITNESS_NAME} `"))?;
    let tagged = STANDARD
        .decode(encoded)
        .map_err(|_| "the cosignature is not base64".to_string())?;
    let (time, signature) = tagged
        .split_at_checked(8)
        .ok_or("the cosignature is too short")?;
    let time = u64::from_be_bytes(
        time.try_into()
            .map_err(|_| "the cosignature is too short")?,
    );
    UnparsedPublicKey::new(&ED25519, public)
        .verify(&cosigned_message(time, &body), signature)
        .map_err(|_| {
            "the cosignature is not the witness's key's: forged, or made by another witness"
                .to_string()
        })?;
    Ok((checkpoint, time))
}

/// Reads a public key as `witness.pub` and the seal's root key write it (base64).
pub fn decode_public(text: &str) -> Option<PublicKey> {
    super::checkpoint::decode_hash(text)
}

impl WitnessDir {
    /// Opens the witness's folder, making it and the witness's key the first time.
    pub fn open(dir: &Path) -> Result<WitnessDir, String> {
        private_dir(&dir.join("logs"))?;
        let key_path = dir.join("witness.key");
        let pkcs8 = match fs::read_to_string(&key_path) {
            Ok(text) => STANDARD
                .decode(text.trim())
                .map_err(|_| format!("{}: not a witness key", key_path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let made = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
                    .map_err(|_| "a witness key could not be made".to_string())?;
                write_new(&key_path, STANDARD.encode(made.as_ref()).as_bytes())?;
                made.as_ref().to_vec()
            }
            Err(e) => return Err(io(&key_path)(e)),
        };
        let key = Ed25519KeyPair::from_pkcs8(&pkcs8)
            .map_err(|_| format!("{}: not a witness key", key_path.display()))?;
        let public: PublicKey = key
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| "the witness key's public half is not 32 bytes".to_string())?;
        let pub_path = dir.join("witness.pub");
        write_new(&pub_path, format!("{}\n", encode_hash(&public)).as_bytes())?;
        Ok(WitnessDir {
            dir: dir.to_path_buf(),
            key,
            public,
        })
    }

    /// The witness's public key.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// The last checkpoint cosigned for the log `origin` (none yet: `None`).
    pub fn latest(&self, origin: &str) -> Result<Option<Checkpoint>, String> {
        let id = id_of_origin(origin).ok_or_else(|| not_a_log_id(origin))?;
        Ok(self.followed(id)?.last)
    }

    fn followed(&self, id: &str) -> Result<Followed, String> {
        let folder = self.dir.join("logs").join(id);
        let mut last: Option<(Checkpoint, PathBuf)> = None;
        match fs::read_dir(folder.join("cosigned")) {
            Ok(entries) => {
                for entry in entries {
                    let path = entry.map_err(io(&folder))?.path();
                    let text = fs::read_to_string(&path).map_err(io(&path))?;
                    let (checkpoint, _) = verify_cosigned(&text, &self.public)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    if last.as_ref().is_none_or(|(l, _)| checkpoint.size > l.size) {
                        last = Some((checkpoint, path));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&folder)(e)),
        }
        let size = last.as_ref().map_or(0, |(c, _)| c.size);
        let leaves_path = folder.join("leaves");
        let mut frontier = Frontier::default();
        if size > 0 {
            let file = File::open(&leaves_path).map_err(io(&leaves_path))?;
            let mut reader = BufReader::new(file);
            let mut leaf = [0u8; 32];
            for _ in 0..size {
                reader.read_exact(&mut leaf).map_err(io(&leaves_path))?;
                frontier.push(leaf);
            }
        }
        if let Some((checkpoint, path)) = &last
            && frontier.root() != checkpoint.root
        {
            return Err(format!(
                "the witness's own record of this log is damaged: its leaves do not make the root of {}",
                path.display()
            ));
        }
        Ok(Followed {
            folder,
            last: last.map(|(c, _)| c),
            frontier,
        })
    }

    /// Checks `checkpoint` against what this witness cosigned for its log, with `proof` (a
    /// consistency proof from the last cosigned size) and `leaves` (the leaf hashes of the
    /// records after it), and cosigns it at `time` (Unix seconds): the cosigned text, or the
    /// refusal as a sentence. A checkpoint already cosigned gets its cosignature again.
    pub fn submit(
        &self,
        checkpoint: &Checkpoint,
        proof: Option<&Proof>,
        leaves: &[Hash],
        time: u64,
    ) -> Result<String, String> {
        let id =
            id_of_origin(&checkpoint.origin).ok_or_else(|| not_a_log_id(&checkpoint.origin))?;
        let mut followed = self.followed(id)?;
        let old = followed.last.as_ref().map_or(0, |c| c.size);
        let size = checkpoint.size;
        if let Some(last) = &followed.last {
            if size < old {
                return Err(format!(
                    "the checkpoint of {size} records is older than the checkpoint of {old} records this witness cosigned for this log: an old checkpoint presented as current, or records deleted since"
                ));
            }
            if size == old {
                if last.root != checkpoint.root {
                    return Err(format!(
                        "a fork: this witness cosigned a tree of {old} records of this log with another root; the log shown now is not the log it saw"
                    ));
                }
                let path = followed.folder.join("cosigned").join(size.to_string());
                return fs::read_to_string(&path).map_err(io(&path));
            }
            let Some(Proof::Consistency {
                origin,
                old: from,
                new: to,
                path,
            }) = proof
            else {
                return Err(format!(
                    "a consistency proof from the {old} records this witness cosigned is needed"
                ));
            };
            if origin != &checkpoint.origin || (*from, *to) != (old, size) {
                return Err(format!(
                    "the consistency proof is for {origin} from {from} to {to} records; this witness needs one for this log from {old} to {size}"
                ));
            }
            merkle::verify_consistency(old, size, &last.root, &checkpoint.root, path).map_err(
                |e| {
                    format!(
                        "not consistent with the checkpoint of {old} records this witness cosigned ({e}): a fork, the log's first {old} records were rewritten"
                    )
                },
            )?;
        }
        if leaves.len() as u64 != size - old {
            return Err(format!(
                "{} leaf hashes were sent for records {} to {size}; {} are needed",
                leaves.len(),
                old + 1,
                size - old
            ));
        }
        for leaf in leaves {
            followed.frontier.push(*leaf);
        }
        if followed.frontier.root() != checkpoint.root {
            return Err(
                "the records sent do not hash to the checkpoint's root: they are not the log's"
                    .to_string(),
            );
        }
        self.keep(&followed, old, leaves, checkpoint, time)
    }

    /// Appends the new leaves (cutting any a stop left beyond the last cosigned size), then
    /// writes the cosigned checkpoint: each fsynced, the leaves first.
    fn keep(
        &self,
        followed: &Followed,
        old: u64,
        leaves: &[Hash],
        checkpoint: &Checkpoint,
        time: u64,
    ) -> Result<String, String> {
        let cosigned = followed.folder.join("cosigned");
        private_dir(&cosigned)?;
        let leaves_path = followed.folder.join("leaves");
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&leaves_path)
            .map_err(io(&leaves_path))?;
        file.set_len(old * 32).map_err(io(&leaves_path))?;
        let bytes: Vec<u8> = leaves.iter().flatten().copied().collect();
        use std::io::{Seek, SeekFrom};
        file.seek(SeekFrom::End(0))
            .and_then(|_| file.write_all(&bytes))
            .and_then(|()| file.sync_all())
            .map_err(io(&leaves_path))?;
        let body = checkpoint.to_string();
        let mut tagged = time.to_be_bytes().to_vec();
        tagged.extend_from_slice(self.key.sign(&cosigned_message(time, &body)).as_ref());
        let text = format!("{body}\n— {WITNESS_NAME} {}\n", STANDARD.encode(tagged));
        write_new(&cosigned.join(checkpoint.size.to_string()), text.as_bytes())?;
        Ok(text)
    }
}

fn not_a_log_id(origin: &str) -> String {
    format!(
        "`{origin}` is not a log this witness keeps: an origin is `{ORIGIN_PREFIX}` and the log's id, 32 lower-case hex digits"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ORIGIN: &str = "boxmaker audit 00112233445566778899aabbccddeeff";

    fn leaves(n: u8, salt: u8) -> Vec<Hash> {
        (0..n).map(|i| merkle::leaf_hash(&[i, salt])).collect()
    }

    fn checkpoint(leaves: &[Hash]) -> Checkpoint {
        Checkpoint {
            origin: ORIGIN.to_string(),
            size: leaves.len() as u64,
            root: merkle::root(leaves),
        }
    }

    fn consistency(leaves: &[Hash], old: u64) -> Proof {
        Proof::Consistency {
            origin: ORIGIN.to_string(),
            old,
            new: leaves.len() as u64,
            path: merkle::consistency_proof(leaves, old).unwrap(),
        }
    }

    #[test]
    fn a_log_that_grows_is_cosigned_and_a_fork_or_an_old_checkpoint_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let witness = WitnessDir::open(dir.path()).unwrap();
        let all = leaves(9, 0);
        let first = witness
            .submit(&checkpoint(&all[..4]), None, &all[..4], 7)
            .unwrap();
        let (cosigned, time) = verify_cosigned(&first, &witness.public()).unwrap();
        assert_eq!((cosigned.size, time), (4, 7));
        let proof = consistency(&all, 4);
        witness
            .submit(&checkpoint(&all), Some(&proof), &all[4..], 8)
            .unwrap();
        assert_eq!(witness.latest(ORIGIN).unwrap().unwrap().size, 9);
        // The same checkpoint again: its cosignature, unchanged.
        let again = witness.submit(&checkpoint(&all), None, &[], 9).unwrap();
        assert_eq!(verify_cosigned(&again, &witness.public()).unwrap().1, 8);
        // Old, forked, inconsistent, wrong leaves, another origin: refused, saying so.
        let old = witness
            .submit(&checkpoint(&all[..4]), None, &[], 9)
            .unwrap_err();
        assert!(old.contains("older than the checkpoint of 9"), "{old}");
        let mut forked = all.clone();
        forked[2] = merkle::leaf_hash(b"rewritten");
        let fork = witness
            .submit(&checkpoint(&forked), None, &[], 9)
            .unwrap_err();
        assert!(fork.starts_with("a fork"), "{fork}");
        forked.extend(leaves(2, 1));
        let proof = consistency(&forked, 9);
        let grown = witness
            .submit(&checkpoint(&forked), Some(&proof), &forked[9..], 9)
            .unwrap_err();
        assert!(grown.starts_with("not consistent"), "{grown}");
        let mut grown = all.clone();
        grown.extend(leaves(2, 1));
        let proof = consistency(&grown, 9);
        let wrong = witness
            .submit(&checkpoint(&grown), Some(&proof), &leaves(2, 2), 9)
            .unwrap_err();
        assert!(wrong.contains("do not hash"), "{wrong}");
        let mut other = checkpoint(&all);
        other.origin = "boxmaker audit /a/path".to_string();
        let named = witness.submit(&other, None, &all, 9).unwrap_err();
        assert!(named.contains("not a log this witness keeps"), "{named}");
        // Another witness's key does not hold for this one's cosignature.
        let elsewhere = tempfile::tempdir().unwrap();
        let another = WitnessDir::open(elsewhere.path()).unwrap();
        assert!(verify_cosigned(&first, &another.public()).is_err());
    }
}
