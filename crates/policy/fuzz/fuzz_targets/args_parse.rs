//! `args::parse` for every tool on any text: arguments or an error, never a panic.
#![no_main]

use policy::args::{ToolName, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for tool in ToolName::KNOWN {
            let _ = parse(tool, text);
        }
    }
});
