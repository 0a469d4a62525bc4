//! The policy crate's integration tests, one binary: argument parsing, grant files, `decide`,
//! and shell coverage (dialects, git, write targets).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod args;
mod decide;
mod downstream;
mod grants;
mod paths;
mod provenance;
mod shell_coverage;
mod shell_dialects;
mod shell_git;
mod shell_rails;
mod shell_redirections;
mod shell_writes;

use std::mem::discriminant;

use policy::shell::NotCovered;

/// A refusal's variant, named by its constructor (`NotCovered::Glob`, …).
type Reason = fn(String) -> NotCovered;

/// Whether `result` is refused with the variant `want` builds and a message that contains
/// `part`: a row that names its reason cannot pass for another one.
fn refused_as<T>(result: &Result<T, NotCovered>, want: Reason, part: &str) -> bool {
    matches!(result, Err(problem)
        if discriminant(problem) == discriminant(&want(String::new()))
            && problem.to_string().contains(part))
}
