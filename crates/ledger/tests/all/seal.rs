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

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn after_an_epoch_advance_the_old_key_s_bytes_are_in_no_file_of_the_state_folder() {
    use base64::Engine as _;
    let dir = testkit::temp_dir();
    let store = SealStore::of(dir.path());
    store.init("boxmaker audit /s").unwrap();
    let key_path = dir.path().join("seal/epoch.key");
    let old_text = fs::read_to_string(&key_path).unwrap();
    let old_encoded = old_text.lines().nth(2).unwrap().to_string();
    let old_pkcs8 = base64::engine::general_purpose::STANDARD
        .decode(&old_encoded)
        .unwrap();
    // ring's Ed25519 PKCS#8 v2 document: a 16-byte header, the 32-byte private seed, then the
    // public key.
    let old_seed = old_pkcs8[16..48].to_vec();
    // A second name for the old key file's inode: what a rename alone would leave holding the
    // key (as the disk's blocks would); erasure in place must zero it too.
    let old_inode = dir.path().join("old-key-inode");
    fs::hard_link(&key_path, &old_inode).unwrap();
    store.seal_now(&checkpoint(1)).unwrap();
    assert_eq!(
        fs::read(&old_inode).unwrap(),
        vec![0u8; old_text.len()],
        "the old key file was not overwritten in place"
    );
    let new_text = fs::read_to_string(&key_path).unwrap();
    assert!(new_text.starts_with("epoch 2\n"), "{new_text}");
    let files = files_under(dir.path());
    assert!(files.len() >= 3, "{files:?}");
    for file in &files {
        let bytes = fs::read(file).unwrap();
        assert!(
            !contains(&bytes, old_encoded.as_bytes()),
            "{} still holds epoch 1's key (base64)",
            file.display()
        );
        assert!(
            !contains(&bytes, &old_seed),
            "{} still holds epoch 1's private seed",
            file.display()
        );
    }
    assert!(!dir.path().join("seal/epoch.new").exists());
}

#[test]
fn a_stop_after_the_old_key_was_erased_in_place_finishes_the_replacement_at_the_next_seal() {
    let dir = testkit::temp_dir();
    let store = SealStore::of(dir.path());
    let root = store.init("boxmaker audit /s").unwrap();
    store.seal_now(&checkpoint(1)).unwrap();
    // The broker stopped with epoch 3's key beside the file and epoch 2's zeroed in place:
    // made here by sealing in a copy of the folder and putting its key beside ours.
    let key_path = dir.path().join("seal/epoch.key");
    let copy = testkit::temp_dir();
    let copy_seal = copy.path().join("seal");
    fs::create_dir_all(copy_seal.join("checkpoints")).unwrap();
    fs::copy(&key_path, copy_seal.join("epoch.key")).unwrap();
    fs::copy(dir.path().join("seal/certs"), copy_seal.join("certs")).unwrap();
    SealStore::of(copy.path()).seal_now(&checkpoint(2)).unwrap();
    fs::copy(
        copy_seal.join("epoch.key"),
        dir.path().join("seal/epoch.new"),
    )
    .unwrap();
    let len = fs::metadata(&key_path).unwrap().len() as usize;
    fs::write(&key_path, vec![0u8; len]).unwrap();
    store.seal_now(&checkpoint(3)).unwrap();
    assert!(!dir.path().join("seal/epoch.new").exists());
    let certs = store.certs().unwrap();
    assert_eq!(
        certs.iter().map(|c| c.epoch).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    let sealed = store.sealed().unwrap();
    let (_, last) = sealed.last().unwrap();
    assert_eq!(verify_seal(last, &root, &certs).unwrap().1, 3);
}
