//! Fuzzes the shell coverage checker: `covers_script` on any text must return (no panic, no
//! hang, no stack overflow), and with no grants nothing is covered; `prefix_words` and
//! `prefix_warning` must return on any text.
//!
//! Run from crates/brokerd/fuzz: `cargo +nightly fuzz run shell_coverage -- -timeout=2`.

#![no_main]

use brokerd::policy::shell::{covers_script, prefix_warning, prefix_words};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let prefixes: Vec<Vec<String>> = [&["git", "status"][..], &["ls"], &["echo"], &["wc", "-l"]]
        .iter()
        .map(|p| p.iter().map(|w| (*w).to_owned()).collect())
        .collect();
    let _ = covers_script(text, &prefixes);
    assert!(
        covers_script(text, &[]).is_err(),
        "covered without grants: {text:?}"
    );
    if let Ok(words) = prefix_words(text) {
        assert!(!words.is_empty());
        let _ = prefix_warning(&words);
        let _ = covers_script(text, &[words]);
    }
});
