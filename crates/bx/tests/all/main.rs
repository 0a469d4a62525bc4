//! `bx` end to end: the binary against a real `brokerd` (testkit::BrokerProcess) and against
//! none, with bad input, and `bx demo` as CI runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod audit_tree;
mod commands;
mod console;
mod demo;
mod doctor;
mod grants_json;
mod mcp;
mod memory;
mod outside_text;
mod preset;
mod tamper_corpus;
mod watch;
mod witness;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use testkit::BrokerProcess;

/// What a `bx` run printed and how it ended.
pub struct Ran {
    /// The exit status.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ran {
    fn of(output: Output) -> Ran {
        Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// `bx ARGS` on these folders, with no terminal.
pub fn bx_in(config: &Path, state: &Path, runtime: &Path, args: &[&str]) -> Ran {
    let output = Command::new(testkit::binary("bx").unwrap())
        .arg("--config-dir")
        .arg(config)
        .arg("--state-dir")
        .arg(state)
        .arg("--runtime-dir")
        .arg(runtime)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Ran::of(output)
}

/// `bx ARGS` against `broker`'s folders.
pub fn bx(broker: &BrokerProcess, args: &[&str]) -> Ran {
    bx_in(&broker.config, &broker.state, &broker.runtime, args)
}
