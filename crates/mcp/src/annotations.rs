//! The hints an MCP client reads beside each tool (`readOnlyHint`, `destructiveHint`,
//! `idempotentHint`, `openWorldHint`) for each tool the broker or a client offers: a built-in
//! tool's from its row in `proto::tools`, the client's own (`toolport`'s) here. They are hints for the client's
//! own interface: the broker's grants decide, whatever a hint says.

use proto::tools::ToolName;
use rmcp::model::ToolAnnotations;

pub use proto::tools::Hints;

/// The hints of `tool`, when it is one boxmaker knows: the client's own tools here, a built-in
/// tool's from its row in `proto::tools`.
pub fn of(tool: &str) -> Option<Hints> {
    match tool {
        toolport::CLOCK | toolport::FIND_TOOL => Some(Hints::new(true, false, true, false)),
        // It calls any tool, so it promises nothing.
        toolport::CALL_TOOL => Some(Hints::new(false, true, false, true)),
        name => ToolName::parse(name).map(|t| t.facts().hints),
    }
}

/// The annotations of `tool` for `tools/list` (none for a tool not in the table).
pub fn annotations(tool: &str) -> Option<ToolAnnotations> {
    let hints = of(tool)?;
    Some(ToolAnnotations::from_raw(
        None,
        Some(hints.read_only),
        Some(hints.destructive),
        Some(hints.idempotent),
        Some(hints.open_world),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_keeps_the_hints_it_was_listed_with_before_the_table() {
        // The rows of this module's former table, one per tool.
        let read = (true, false, true, false);
        let listed = [
            ("clock", read),
            ("find_tool", read),
            ("call_tool", (false, true, false, true)),
            ("read_file", read),
            ("list_files", read),
            ("glob", read),
            ("grep", read),
            ("git_status", read),
            ("git_diff", read),
            ("bash_tail", read),
            ("recall", read),
            ("ask_memory", read),
            ("write_file", (false, true, true, false)),
            ("edit_file", (false, true, false, false)),
            ("memory", (false, false, false, false)),
            ("shell", (false, true, false, false)),
            ("bash_bg", (false, true, false, false)),
            ("bash_kill", (false, true, true, false)),
            ("git_clone", (false, false, false, true)),
            ("http_fetch", (true, false, true, true)),
            ("web_search", (true, false, true, true)),
            ("consult", (true, false, false, true)),
            ("ask", (true, false, false, false)),
            // Added after the table: it opens a child session or reads its report; what the
            // child then does is decided call by call.
            ("delegate", (false, false, false, false)),
        ];
        for (tool, (r, d, i, o)) in listed {
            assert_eq!(of(tool), Some(Hints::new(r, d, i, o)), "{tool}");
        }
        for tool in ToolName::EVERY {
            assert!(
                listed.iter().any(|(name, _)| *name == tool.as_str()),
                "{}",
                tool.as_str()
            );
        }
    }

    #[test]
    fn what_only_reads_is_never_destructive_and_what_reaches_out_is_open_world() {
        for tool in [
            "read_file",
            "grep",
            "glob",
            "list_files",
            "git_status",
            "git_diff",
        ] {
            let h = of(tool).unwrap();
            assert!(h.read_only && !h.destructive && !h.open_world, "{tool}");
        }
        for tool in ["write_file", "edit_file", "shell", "bash_bg", "bash_kill"] {
            let h = of(tool).unwrap();
            assert!(!h.read_only && h.destructive, "{tool}");
        }
        for tool in ["http_fetch", "web_search", "git_clone", "consult"] {
            assert!(of(tool).unwrap().open_world, "{tool}");
        }
        assert!(!of("edit_file").unwrap().idempotent);
        assert!(of("write_file").unwrap().idempotent);
        assert_eq!(of("server.tool"), None);
        let a = annotations("shell").unwrap();
        assert_eq!(a.read_only_hint, Some(false));
        assert_eq!(a.destructive_hint, Some(true));
    }
}
