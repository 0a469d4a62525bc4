//! The grants loader on any text: problems or grants, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = policy::grants::parse_file(text, Path::new("fuzz.toml"), Path::new("/home/fuzz"));
    }
});
