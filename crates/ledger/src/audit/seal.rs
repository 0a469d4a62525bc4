//! Forward-secure seals on checkpoints (issue 36, item 2, the scheme only: nothing here writes
//! keys to disk or runs on a timer). Ed25519 through `ring`.
//!
//! The scheme: `init` makes a root key pair and the first epoch's key pair, the root key
//! certifies epoch 1's public key, and the root's private key is dropped without ever being
//! written: what the owner keeps off the machine is only the root **public** key (its
//! integrity matters, not its secrecy). Each epoch's key certifies the next one's public key
//! ([`SealKey::evolve`]), and is then given up (the caller erases its file once the next one is
//! on disk), so a process that steals epoch N's key can sign as epoch N and later, never as an
//! earlier epoch: checking a seal walks the certificates from the root to the epoch it names.
//!
//! A sealed checkpoint is the checkpoint's text, an empty line, and one signature line in the
//! style of a signed note: `— boxmaker-seal <base64 of the epoch (8 bytes, big-endian) and the
//! signature over the checkpoint's text>`.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use zeroize::Zeroizing;

use super::checkpoint::Checkpoint;

/// The signature line's key name.
pub const SEAL_NAME: &str = "boxmaker-seal";

/// An Ed25519 public key.
pub type PublicKey = [u8; 32];

/// The signing key of one epoch, held by the broker.
pub struct SealKey {
    epoch: u64,
    origin: String,
    pair: Ed25519KeyPair,
    /// The key as PKCS#8, what is written to the broker's key file; zeroed when dropped.
    pkcs8: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey(epoch {}, {})", self.epoch, self.origin)
    }
}

/// An epoch's public key, certified by the key of the epoch before (epoch 1: the root key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochCert {
    /// The epoch, from 1.
    pub epoch: u64,
    /// Its public key.
    pub public: PublicKey,
    /// The previous key's signature over [`EpochCert::message`].
    pub signature: Vec<u8>,
}

/// Why a seal does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// A key could not be made (the system's randomness failed).
    #[error("a seal key could not be made")]
    Key,
    /// The text is not a sealed checkpoint.
    #[error("not a sealed checkpoint: {0}")]
    Text(String),
    /// The certificate of an epoch is missing, out of order, or not signed by the key before.
    #[error("epoch {0}'s key is not certified by the key of the epoch before it (or the root)")]
    Cert(u64),
    /// The checkpoint's signature is not its epoch's key's.
    #[error(
        "the checkpoint's signature is not epoch {0}'s key's: forged, or sealed with another key"
    )]
    Signature(u64),
}

fn new_pair(random: &SystemRandom) -> Result<(Ed25519KeyPair, Zeroizing<Vec<u8>>), SealError> {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(random).map_err(|_| SealError::Key)?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|_| SealError::Key)?;
    Ok((pair, Zeroizing::new(pkcs8.as_ref().to_vec())))
}

fn public_of(pair: &Ed25519KeyPair) -> Result<PublicKey, SealError> {
    pair.public_key()
        .as_ref()
        .try_into()
        .map_err(|_| SealError::Key)
}

impl EpochCert {
    /// The certificate as one line of the certificates file: `epoch N <key> <signature>`.
    pub fn to_line(&self) -> String {
        format!(
            "epoch {} {} {}",
            self.epoch,
            STANDARD.encode(self.public),
            STANDARD.encode(&self.signature)
        )
    }

    /// A certificates file's line, read back.
    pub fn from_line(line: &str) -> Result<EpochCert, SealError> {
        let bad = || SealError::Text(format!("not an epoch certificate: {line}"));
        let mut words = line.strip_prefix("epoch ").ok_or_else(bad)?.split(' ');
        let epoch = words.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let public = words
            .next()
            .and_then(|k| STANDARD.decode(k).ok())
            .and_then(|k| PublicKey::try_from(k).ok())
            .ok_or_else(bad)?;
        let signature = words
            .next()
            .and_then(|s| STANDARD.decode(s).ok())
            .ok_or_else(bad)?;
        if words.next().is_some() {
            return Err(bad());
        }
        Ok(EpochCert {
            epoch,
            public,
            signature,
        })
    }

    /// The bytes the previous key signs: the epoch, the log's origin and the key.
    pub fn message(epoch: u64, origin: &str, public: &PublicKey) -> Vec<u8> {
        format!(
            "boxmaker audit seal epoch {epoch}\n{origin}\n{}\n",
            STANDARD.encode(public)
        )
        .into_bytes()
    }
}

/// Starts sealing the log `origin`: the root public key (what the owner keeps off the
/// machine), epoch 1's key and its certificate. The root's private key is dropped here.
pub fn init(origin: &str) -> Result<(PublicKey, SealKey, EpochCert), SealError> {
    let random = SystemRandom::new();
    let (root, _) = new_pair(&random)?;
    let (first, pkcs8) = new_pair(&random)?;
    let public = public_of(&first)?;
    let cert = EpochCert {
        epoch: 1,
        public,
        signature: root
            .sign(&EpochCert::message(1, origin, &public))
            .as_ref()
            .to_vec(),
    };
    let key = SealKey {
        epoch: 1,
        origin: origin.to_string(),
        pair: first,
        pkcs8,
    };
    Ok((public_of(&root)?, key, cert))
}

impl SealKey {
    /// The epoch this key signs for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The next epoch's key and its certificate, signed by this key, which is consumed.
    pub fn evolve(self) -> Result<(SealKey, EpochCert), SealError> {
        let (next, pkcs8) = new_pair(&SystemRandom::new())?;
        let public = public_of(&next)?;
        let epoch = self.epoch + 1;
        let cert = EpochCert {
            epoch,
            public,
            signature: self
                .pair
                .sign(&EpochCert::message(epoch, &self.origin, &public))
                .as_ref()
                .to_vec(),
        };
        Ok((
            SealKey {
                epoch,
                origin: self.origin,
                pair: next,
                pkcs8,
            },
            cert,
        ))
    }

    /// The key file's text: its epoch, its log's origin and the key (PKCS#8, base64); zeroed
    /// when dropped.
    pub fn to_text(&self) -> Zeroizing<String> {
        let encoded = Zeroizing::new(STANDARD.encode(self.pkcs8.as_slice()));
        Zeroizing::new(format!(
            "epoch {}\n{}\n{}\n",
            self.epoch,
            self.origin,
            encoded.as_str()
        ))
    }

    /// A key file's text, read back.
    pub fn from_text(text: &str) -> Result<SealKey, SealError> {
        let bad = || SealError::Text("not a seal key file".to_string());
        let mut lines = text.lines();
        let epoch = lines
            .next()
            .and_then(|l| l.strip_prefix("epoch "))
            .and_then(|n| n.parse().ok())
            .ok_or_else(bad)?;
        let origin = lines.next().ok_or_else(bad)?.to_string();
        let pkcs8 = lines
            .next()
            .and_then(|l| STANDARD.decode(l).ok())
            .map(Zeroizing::new)
            .ok_or_else(bad)?;
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_slice()).map_err(|_| bad())?;
        Ok(SealKey {
            epoch,
            origin,
            pair,
            pkcs8,
        })
    }

    /// The checkpoint's text followed by this epoch's seal.
    pub fn seal(&self, checkpoint: &Checkpoint) -> String {
        let body = checkpoint.to_string();
        let mut tagged = self.epoch.to_be_bytes().to_vec();
        tagged.extend_from_slice(self.pair.sign(body.as_bytes()).as_ref());
        format!("{body}\n— {SEAL_NAME} {}\n", STANDARD.encode(tagged))
    }
}

/// Checks a sealed checkpoint against the owner's root public key and the epochs'
/// certificates (in order from epoch 1): the epoch it names must be certified link by link
/// from the root, for this checkpoint's log, and its signature must be that epoch's key's.
/// Returns the checkpoint and its epoch.
pub fn verify_seal(
    text: &str,
    root: &PublicKey,
    certs: &[EpochCert],
) -> Result<(Checkpoint, u64), SealError> {
    let (body, signature) = text
        .split_once("\n\n")
        .ok_or_else(|| SealError::Text("no empty line before the seal".to_string()))?;
    let body = format!("{body}\n");
    let checkpoint = Checkpoint::parse(&body).map_err(|e| SealError::Text(e.to_string()))?;
    let encoded = signature
        .trim_end_matches('\n')
        .strip_prefix(&format!("— {SEAL_NAME} "))
        .ok_or_else(|| SealError::Text(format!("the seal line must start `— {SEAL_NAME} `")))?;
    let tagged = STANDARD
        .decode(encoded)
        .map_err(|_| SealError::Text("the seal is not base64".to_string()))?;
    let (epoch, signature) = tagged
        .split_at_checked(8)
        .ok_or_else(|| SealError::Text("the seal is too short".to_string()))?;
    let epoch = u64::from_be_bytes(
        epoch
            .try_into()
            .map_err(|_| SealError::Text("the seal is too short".to_string()))?,
    );
    let mut key = *root;
    for at in 1..=epoch {
        let cert = certs
            .get(at as usize - 1)
            .filter(|c| c.epoch == at)
            .ok_or(SealError::Cert(at))?;
        UnparsedPublicKey::new(&ED25519, key)
            .verify(
                &EpochCert::message(at, &checkpoint.origin, &cert.public),
                &cert.signature,
            )
            .map_err(|_| SealError::Cert(at))?;
        key = cert.public;
    }
    if epoch == 0 {
        return Err(SealError::Signature(0));
    }
    UnparsedPublicKey::new(&ED25519, key)
        .verify(body.as_bytes(), signature)
        .map_err(|_| SealError::Signature(epoch))?;
    Ok((checkpoint, epoch))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ORIGIN: &str = "boxmaker audit /s";

    fn checkpoint(size: u64) -> Checkpoint {
        Checkpoint {
            origin: ORIGIN.to_string(),
            size,
            root: [size as u8; 32],
        }
    }

    /// Epochs 1 to `n`: the root key, every certificate, and each epoch's seal on a checkpoint.
    fn epochs(n: u64) -> (PublicKey, Vec<EpochCert>, Vec<String>, SealKey) {
        let (root, mut key, cert) = init(ORIGIN).unwrap();
        let mut certs = vec![cert];
        let mut sealed = vec![key.seal(&checkpoint(1))];
        for epoch in 2..=n {
            let (next, cert) = key.evolve().unwrap();
            key = next;
            certs.push(cert);
            sealed.push(key.seal(&checkpoint(epoch)));
        }
        (root, certs, sealed, key)
    }

    #[test]
    fn each_epochs_seal_holds_through_the_certificates_from_the_root() {
        let (root, certs, sealed, _) = epochs(4);
        let certs: Vec<EpochCert> = certs
            .iter()
            .map(|c| EpochCert::from_line(&c.to_line()).unwrap())
            .collect();
        for (i, text) in sealed.iter().enumerate() {
            let (checkpoint, epoch) = verify_seal(text, &root, &certs).unwrap();
            assert_eq!((checkpoint.size, epoch), (i as u64 + 1, i as u64 + 1));
        }
        assert!(sealed[0].contains("\n\n— boxmaker-seal "), "{}", sealed[0]);
    }

    #[test]
    fn an_old_epoch_resealed_with_a_later_key_is_refused() {
        let (root, certs, _, key) = epochs(3);
        // The thief holds epoch 3's key and rewrites epoch 1's checkpoint, claiming epoch 1.
        let mut tagged = 1u64.to_be_bytes().to_vec();
        tagged.extend_from_slice(key.pair.sign(checkpoint(1).to_string().as_bytes()).as_ref());
        let claimed = format!(
            "{}\n— {SEAL_NAME} {}\n",
            checkpoint(1),
            STANDARD.encode(tagged)
        );
        assert_eq!(
            verify_seal(&claimed, &root, &certs),
            Err(SealError::Signature(1))
        );
        // Nor can it certify a key of its own for an earlier epoch.
        let (own, _) = SealKey::from_text(&key.to_text())
            .unwrap()
            .evolve()
            .unwrap();
        let mut replaced = certs.clone();
        replaced[1] = EpochCert {
            epoch: 2,
            public: public_of(&own.pair).unwrap(),
            signature: own
                .pair
                .sign(&EpochCert::message(
                    2,
                    ORIGIN,
                    &public_of(&own.pair).unwrap(),
                ))
                .as_ref()
                .to_vec(),
        };
        assert_eq!(
            verify_seal(&own.seal(&checkpoint(2)), &root, &replaced),
            Err(SealError::Cert(2))
        );
    }

    #[test]
    fn a_forged_signature_is_refused() {
        let (root, certs, sealed, _) = epochs(2);
        let line = sealed[1].lines().last().unwrap();
        let encoded = line.strip_prefix("— boxmaker-seal ").unwrap();
        let mut tagged = STANDARD.decode(encoded).unwrap();
        let last = tagged.len() - 1;
        tagged[last] ^= 1;
        let forged = sealed[1].replace(encoded, &STANDARD.encode(tagged));
        assert_eq!(
            verify_seal(&forged, &root, &certs),
            Err(SealError::Signature(2))
        );
        // Another root (another owner's key) does not vouch for these epochs.
        let (other_root, _, _) = init(ORIGIN).unwrap();
        assert_eq!(
            verify_seal(&sealed[0], &other_root, &certs),
            Err(SealError::Cert(1))
        );
    }

    #[test]
    fn a_checkpoint_sealed_for_one_log_does_not_hold_for_another() {
        let (root, certs, sealed, _) = epochs(1);
        let moved = sealed[0].replacen(ORIGIN, "boxmaker audit /other", 1);
        assert_eq!(verify_seal(&moved, &root, &certs), Err(SealError::Cert(1)));
    }
}
