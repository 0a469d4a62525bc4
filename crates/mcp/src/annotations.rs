//! The hints an MCP client reads beside each tool (`readOnlyHint`, `destructiveHint`,
//! `idempotentHint`, `openWorldHint`), one row per tool the broker or loopd offers. They are
//! hints for the client's own interface: the broker's grants decide, whatever a hint says.

use rmcp::model::ToolAnnotations;

/// The four hints of one tool: read-only, destructive, idempotent, open-world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// It changes nothing.
    pub read_only: bool,
    /// A change it makes may destroy something (meaningful when not read-only).
    pub destructive: bool,
    /// The same call again changes nothing more.
    pub idempotent: bool,
    /// It reaches beyond the owner's machine (the web, another model).
    pub open_world: bool,
}

const fn hints(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> Hints {
    Hints {
        read_only,
        destructive,
        idempotent,
        open_world,
    }
}

/// The hints of `tool`, when it is one boxmaker knows.
pub fn of(tool: &str) -> Option<Hints> {
    Some(match tool {
        "clock" | "find_tool" => hints(true, false, true, false),
        // It calls any tool, so it promises nothing.
        "call_tool" => hints(false, true, false, true),
        "read_file" | "list_files" | "glob" | "grep" | "git_status" | "git_diff" | "bash_tail" => {
            hints(true, false, true, false)
        }
        "recall" | "ask_memory" => hints(true, false, true, false),
        "write_file" => hints(false, true, true, false),
        "edit_file" => hints(false, true, false, false),
        "memory" => hints(false, false, false, false),
        "shell" | "bash_bg" => hints(false, true, false, false),
        "bash_kill" => hints(false, true, true, false),
        "git_clone" => hints(false, false, false, true),
        "http_fetch" | "web_search" => hints(true, false, true, true),
        "consult" => hints(true, false, false, true),
        "ask" => hints(true, false, false, false),
        _ => return None,
    })
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
