//! Fuzzes the shell coverage checker: `covers_script_as` (bash's and sh's rules),
//! `touches_script_as` and `write_targets` on any text must return (no panic, no hang, no stack
//! overflow); with no grants nothing is covered; what sh's rules cover, bash's cover too;
//! `prefix_words` and `prefix_warning` must return on any text; so must the guard rails
//! (`catastrophic`, `backgrounded`, `path_words`), whose reading of a script allows more than
//! coverage's.
//!
//! Run from crates/policy/fuzz: `cargo +nightly fuzz run shell_coverage -- -timeout=2`.

#![no_main]

use policy::shell::{
    Dialect, Place, backgrounded, catastrophic, covers_script, covers_script_as, path_words,
    prefix_warning, prefix_words, touches_script_as, write_targets,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let prefixes: Vec<Vec<String>> = [&["git", "status"][..], &["ls"], &["echo"], &["wc", "-l"]]
        .iter()
        .map(|p| p.iter().map(|w| (*w).to_owned()).collect())
        .collect();
    let bash = covers_script(text, &prefixes);
    let posix = covers_script_as(text, &prefixes, Dialect::Posix);
    assert!(
        posix.is_err() || bash.is_ok(),
        "covered by sh's rules only: {text:?}"
    );
    let _ = touches_script_as(text, &prefixes, Dialect::Bash);
    let _ = touches_script_as(text, &prefixes, Dialect::Posix);
    let _ = write_targets(text, Dialect::Bash);
    let _ = write_targets(text, Dialect::Posix);
    assert!(
        covers_script(text, &[]).is_err(),
        "covered without grants: {text:?}"
    );
    let granted = [std::path::PathBuf::from("/work/proj")];
    let place = Place {
        cwd: std::path::Path::new("/work/proj"),
        home: Some(std::path::Path::new("/home/owner")),
        granted: &granted,
    };
    let _ = catastrophic(text, &place);
    let _ = backgrounded(text);
    let _ = path_words(text);
    if let Ok(words) = prefix_words(text) {
        assert!(!words.is_empty());
        let _ = prefix_warning(&words);
        let _ = covers_script(text, &[words]);
    }
});
