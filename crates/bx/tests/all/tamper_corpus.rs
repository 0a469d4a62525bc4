//! Issue 36's tamper corpus, end to end: each case is made on a log a witness (`bx audit
//! witness`, a process on a temporary socket) cosigned through `bx audit cosign`, and each
//! test's name says the check that catches it: the chain (`bx audit verify`'s first line),
//! the witness's folder (`--witness`), the witness itself (it refuses to cosign), or the
//! seals (`--seal-root`). The tree-only cases (a checkpoint file, no witness) are in the
//! ledger's `tamper.rs`; the seal scheme's own cases in `ledger::audit::seal`.

use std::fs;
use std::os::unix::net::UnixListener;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::audit_tree::State;
use super::witness::{Witness, lines_of, rechain, verify_witnessed};

/// A state folder of `n` records whose checkpoint `witness` cosigned.
fn witnessed(witness: &Witness, n: usize) -> State {
    let mut state = State::new();
    state.append(n);
    cosign(&state, witness, 0);
    state
}

/// `bx audit cosign --witness`, which must end with `code`; what it printed on error.
fn cosign(state: &State, witness: &Witness, code: i32) -> String {
    let ran = state.bx(&["audit", "cosign", "--witness", &witness.address()]);
    assert_eq!(ran.code, code, "{}{}", ran.stdout, ran.stderr);
    ran.stderr
}

fn verify(state: &State, witness: &Witness) -> String {
    let ran = verify_witnessed(&state.state(), &witness.dir());
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    ran.stdout
}

fn write_lines(state: &State, lines: &[String]) {
    fs::write(state.log_path(), lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_tail_truncated_and_continued_is_caught_by_the_witness_folder_naming_the_first_new_record() {
    let witness = Witness::start();
    let mut state = witnessed(&witness, 6);
    let lines = lines_of(&state.log_path());
    write_lines(&state, &lines[..4]);
    state.reopen();
    state.append(3);
    let out = verify(&state, &witness);
    assert!(out.contains("the chain holds: 7 records"), "{out}");
    assert!(
        out.contains("witness: record 5 (line 5) no longer matches"),
        "{out}"
    );
    // And the witness refuses the continued log: not consistent with what it cosigned.
    let refused = cosign(&state, &witness, 1);
    assert!(
        refused.contains("not consistent with the checkpoint of 6 records"),
        "{refused}"
    );
}

#[test]
fn a_record_deleted_in_the_middle_is_caught_by_the_chain_and_by_the_witness_folder() {
    let witness = Witness::start();
    let state = witnessed(&witness, 6);
    let mut lines = lines_of(&state.log_path());
    lines.remove(2);
    write_lines(&state, &lines);
    let out = verify(&state, &witness);
    assert!(out.contains("record 3 is missing (deleted"), "{out}");
    assert!(
        out.contains("witness: record 3 (line 3) no longer matches"),
        "{out}"
    );
}

#[test]
fn two_records_swapped_are_caught_by_the_chain_and_by_the_witness_folder() {
    let witness = Witness::start();
    let state = witnessed(&witness, 6);
    let mut lines = lines_of(&state.log_path());
    lines.swap(3, 4);
    write_lines(&state, &lines);
    let out = verify(&state, &witness);
    assert!(out.contains("record 4 (line 4)"), "{out}");
    assert!(
        out.contains("witness: record 4 (line 4) no longer matches"),
        "{out}"
    );
}

#[test]
fn a_flipped_byte_is_caught_by_the_chain_and_by_the_witness_folder() {
    let witness = Witness::start();
    let state = witnessed(&witness, 6);
    let mut bytes = fs::read(state.log_path()).unwrap();
    let lines = lines_of(&state.log_path());
    let at = lines[..1].iter().map(|l| l.len() + 1).sum::<usize>() + lines[1].len() - 4;
    bytes[at] ^= 0x01;
    fs::write(state.log_path(), bytes).unwrap();
    let out = verify(&state, &witness);
    assert!(out.contains("record 2 does not hash"), "{out}");
    assert!(
        out.contains("witness: record 2 (line 2) no longer matches"),
        "{out}"
    );
}

#[test]
fn an_edit_with_the_chain_recomputed_is_caught_by_the_witness_folder_alone() {
    let witness = Witness::start();
    let state = witnessed(&witness, 6);
    let mut lines = lines_of(&state.log_path());
    lines[3] = lines[3].replace("\"s4\"", "\"nobody\"");
    fs::write(state.log_path(), rechain(&lines)).unwrap();
    let out = verify(&state, &witness);
    assert!(out.contains("the chain holds: 6 records"), "{out}");
    assert!(
        out.contains("witness: record 4 (line 4) no longer matches"),
        "{out}"
    );
}

#[test]
fn an_old_epoch_resealed_with_a_later_key_is_caught_by_the_seal_check() {
    let mut state = State::new();
    state.append(4);
    let root = state
        .bx(&["audit", "seal", "init"])
        .stdout
        .trim()
        .to_string();
    assert_eq!(state.bx(&["audit", "seal", "now"]).code, 0);
    state.append(2);
    assert_eq!(state.bx(&["audit", "seal", "now"]).code, 0);
    // The intruder holds epoch 3's key: it rewrites record 2 and seals the log's first 4
    // records with it, claiming epoch 1, in place of epoch 1's sealed checkpoint.
    let mut lines = lines_of(&state.log_path());
    lines[1] = lines[1].replace("\"s2\"", "\"nobody\"");
    fs::write(state.log_path(), rechain(&lines)).unwrap();
    let first4 = state.keep("first4", &["audit", "checkpoint", "--size", "4"]);
    let checkpoint = ledger::Checkpoint::parse(&fs::read_to_string(first4).unwrap()).unwrap();
    let key_text = fs::read_to_string(state.state().join("seal/epoch.key")).unwrap();
    let key = ledger::audit::seal::SealKey::from_text(&key_text).unwrap();
    let sealed = key.seal(&checkpoint);
    let (body, line) = sealed.split_once("\n\n").unwrap();
    let encoded = line.trim().strip_prefix("— boxmaker-seal ").unwrap();
    let mut tagged = STANDARD.decode(encoded).unwrap();
    tagged[..8].copy_from_slice(&1u64.to_be_bytes());
    let claimed = format!("{body}\n\n— boxmaker-seal {}\n", STANDARD.encode(tagged));
    fs::write(state.state().join("seal/checkpoints/4.e1"), claimed).unwrap();
    let ran = state.bx(&["audit", "verify", "--seal-root", &root]);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("the seal fails: the checkpoint's signature is not epoch 1's key's"),
        "{}",
        ran.stdout
    );
}

#[test]
fn an_old_checkpoint_presented_as_current_is_refused_by_the_witness_and_reads_as_records_deleted() {
    let witness = Witness::start();
    let mut state = witnessed(&witness, 4);
    let old = fs::read(state.log_path()).unwrap();
    state.append(3);
    cosign(&state, &witness, 0);
    // The log rolled back to the checkpoint of 4 records and presented again.
    fs::write(state.log_path(), old).unwrap();
    let refused = cosign(&state, &witness, 1);
    assert!(
        refused.contains("older than the checkpoint of 7 records this witness cosigned"),
        "{refused}"
    );
    let out = verify(&state, &witness);
    assert!(
        out.contains(
            "witness: records deleted: the log holds 4 records, but the witness cosigned 7"
        ),
        "{out}"
    );
}

#[test]
fn a_forked_log_of_the_same_size_is_refused_by_the_witness() {
    let witness = Witness::start();
    let state = witnessed(&witness, 5);
    // Another copy of the log (the same first record, so the same log id) whose record 3
    // differs: the same size, another root.
    let fork = State::new();
    let mut lines = lines_of(&state.log_path());
    lines[2] = lines[2].replace("\"s3\"", "\"forked\"");
    fs::write(fork.log_path(), rechain(&lines)).unwrap();
    let refused = cosign(&fork, &witness, 1);
    assert!(
        refused.contains(
            "a fork: this witness cosigned a tree of 5 records of this log with another root"
        ),
        "{refused}"
    );
    assert!(
        witness
            .said()
            .iter()
            .any(|l| l.contains("refused") && l.contains("a fork")),
        "{:?}",
        witness.said()
    );
}

#[test]
fn a_forged_cosignature_is_caught_by_the_witness_folders_key() {
    let witness = Witness::start();
    let state = witnessed(&witness, 3);
    let logs = witness.dir().join("logs");
    let log = fs::read_dir(&logs).unwrap().next().unwrap().unwrap().path();
    let note = log.join("cosigned/3");
    let text = fs::read_to_string(&note).unwrap();
    let (body, line) = text.split_once("\n\n").unwrap();
    let encoded = line.trim().strip_prefix("— boxmaker-witness ").unwrap();
    let mut tagged = STANDARD.decode(encoded).unwrap();
    let last = tagged.len() - 1;
    tagged[last] ^= 0x01;
    fs::write(
        &note,
        format!("{body}\n\n— boxmaker-witness {}\n", STANDARD.encode(tagged)),
    )
    .unwrap();
    let out = verify(&state, &witness);
    assert!(
        out.contains("the cosignature is not the witness's key's: forged"),
        "{out}"
    );
}

#[test]
fn a_witness_answering_for_another_log_is_caught_by_the_cosign_check_and_the_witness_folder() {
    let witness = Witness::start();
    let one = witnessed(&witness, 3);
    let other = witnessed(&witness, 3);
    // The folder of a witness of two other logs holds nothing for a third.
    let mut third = State::new();
    third.append(2);
    let out = verify(&third, &witness);
    assert!(
        out.contains("witness: the witness holds no checkpoint of this log"),
        "{out}"
    );
    // A cosignature of one log put in the other's folder is refused as such.
    let logs = witness.dir().join("logs");
    let folder = |state: &State| {
        let origin = state.bx(&["audit", "checkpoint"]).stdout;
        let id = origin
            .lines()
            .next()
            .unwrap()
            .strip_prefix("boxmaker audit ")
            .unwrap()
            .to_string();
        logs.join(id)
    };
    fs::copy(
        folder(&one).join("cosigned/3"),
        folder(&other).join("cosigned/2"),
    )
    .unwrap();
    let out = verify(&other, &witness);
    assert!(out.contains("it is cosigned for another log"), "{out}");
    // A witness that answers the checkpoint of `other` with its cosignature of `one`: not
    // believed, nothing kept.
    let note = fs::read_to_string(folder(&one).join("cosigned/3")).unwrap();
    let root = testkit::temp_dir();
    let socket = root.path().join("liar.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let liar = std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        let (stream, _) = listener.accept().unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut lines = BufReader::new(stream).lines();
        lines.next().unwrap().unwrap();
        writeln!(writer, r#"{{"latest":{{"size":0,"root":""}}}}"#).unwrap();
        lines.next().unwrap().unwrap();
        let reply = serde_json::json!({"cosigned": {"note": note}});
        writeln!(writer, "{reply}").unwrap();
    });
    let ran = other.bx(&[
        "audit",
        "cosign",
        "--witness",
        &format!("unix:{}", socket.display()),
    ]);
    liar.join().unwrap();
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("it cosigned another checkpoint than the one sent"),
        "{}",
        ran.stderr
    );
}
