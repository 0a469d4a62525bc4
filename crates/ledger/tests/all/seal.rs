//! Sealing's files: a stop between writing the next key and appending its certificate, and a
//! folder that already seals.

use std::fs;

use ledger::audit::seal::verify_seal;
use ledger::audit::{Checkpoint, SealStore, SealStoreError};

fn checkpoint(size: u64) -> Checkpoint {
    Checkpoint {
        origin: "boxmaker audit /s".to_string(),
        size,
        root: [size as u8; 32],
    }
}

#[test]
fn a_stop_between_the_new_key_and_its_certificate_is_mended_at_the_next_seal() {
    let dir = testkit::temp_dir();
    let store = SealStore::of(dir.path());
    let root = store.init("boxmaker audit /s").unwrap();
    store.seal_now(&checkpoint(1)).unwrap();
    // The broker stopped after epoch 2's key replaced epoch 1's, before certs had its line.
    let certs = dir.path().join("seal/certs");
    let text = fs::read_to_string(&certs).unwrap();
    let first: Vec<&str> = text.lines().take(1).collect();
    fs::write(&certs, first.join("\n") + "\n").unwrap();
    store.seal_now(&checkpoint(2)).unwrap();
    let certs = store.certs().unwrap();
    assert_eq!(
        certs.iter().map(|c| c.epoch).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let sealed = store.sealed().unwrap();
    assert_eq!(sealed.len(), 2);
    for (epoch, (_, text)) in (1u64..).zip(&sealed) {
        assert_eq!(verify_seal(text, &root, &certs).unwrap().1, epoch);
    }
}

#[test]
fn setting_up_sealing_twice_is_refused_and_keeps_the_first_keys() {
    let dir = testkit::temp_dir();
    let store = SealStore::of(dir.path());
    store.init("boxmaker audit /s").unwrap();
    let key = fs::read(dir.path().join("seal/epoch.key")).unwrap();
    assert!(matches!(
        store.init("boxmaker audit /s"),
        Err(SealStoreError::Exists(_))
    ));
    assert_eq!(fs::read(dir.path().join("seal/epoch.key")).unwrap(), key);
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir.path().join("seal/epoch.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}
