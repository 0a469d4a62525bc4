//! Grants indexed by tool and by folder, so that a decision looks only at the grants that can
//! cover its call: a list of 10,000 grants costs a call what the few of its tool and its folders
//! cost, not what every grant does.
//!
//! **Why it gives the same decision.** A grant covers a call only when it names the call's tool
//! (`covers` checks that first), and for a file tool (`read_file`, `write_file`, `edit_file`,
//! the walkers, `git_status`, `git_diff`) a grant with paths covers it only when one of its
//! paths covers the call's resolved path, which then lies at or below that path's base folder
//! (a folder's own, or a glob's literal leading folders; a deny rule's literal reading lies
//! below it too). So the candidates of a file tool's call are its tool's grants without paths
//! and those with a path whose base is the call's path or one of its ancestors; every other
//! tool's candidates are its tool's grants. They are visited in file order, as the whole list
//! is. A property test checks the indexed decision against the plain one.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::args::{CallReach, ToolArgs, ToolName};
use crate::grants::Grant;

/// One tool's grants, by position in the list.
#[derive(Debug, Clone, Default)]
struct ToolGrants {
    /// All of them, in file order.
    all: Vec<usize>,
    /// A file tool's grants without paths (a deny grant that names none covers every path).
    unpathed: Vec<usize>,
    /// A file tool's grants with paths, under each path's base folder.
    by_base: HashMap<PathBuf, Vec<usize>>,
}

/// A grant list's index ([`GrantIndex::new`]); it describes that list alone.
#[derive(Debug, Clone, Default)]
pub struct GrantIndex {
    by_tool: HashMap<ToolName, ToolGrants>,
    /// How many grants the list had: an index used with another list is not used.
    len: usize,
}

impl GrantIndex {
    /// The index of `grants`.
    pub fn new(grants: &[Grant]) -> GrantIndex {
        let mut by_tool: HashMap<ToolName, ToolGrants> = HashMap::new();
        for (at, grant) in grants.iter().enumerate() {
            let entry = by_tool.entry(grant.tool).or_default();
            entry.all.push(at);
            if !grant.tool.is_path_tool() || grant.paths.is_empty() {
                entry.unpathed.push(at);
                continue;
            }
            for rule in &grant.paths {
                let under = entry.by_base.entry(rule.base()).or_default();
                if under.last() != Some(&at) {
                    under.push(at);
                }
            }
        }
        GrantIndex {
            by_tool,
            len: grants.len(),
        }
    }

    /// Whether it was built for a list of `len` grants.
    pub(crate) fn fits(&self, len: usize) -> bool {
        self.len == len
    }

    /// The positions of the grants that may cover a call with `args` (paths resolved), in
    /// file order.
    pub(crate) fn candidates(&self, args: &ToolArgs) -> Cow<'_, [usize]> {
        let tool = args.tool().granted_by();
        let Some(entry) = self.by_tool.get(&tool) else {
            return Cow::Borrowed(&[]);
        };
        let path = match args.path() {
            Some(path) if tool.is_path_tool() && path_tool_call(args) => Path::new(path),
            _ => return Cow::Borrowed(&entry.all),
        };
        let mut found = entry.unpathed.clone();
        for folder in path.ancestors() {
            if let Some(under) = entry.by_base.get(folder) {
                found.extend_from_slice(under);
            }
        }
        found.sort_unstable();
        found.dedup();
        Cow::Owned(found)
    }
}

/// Whether a call is decided by its one path alone (a file tool's), which the index keys on.
fn path_tool_call(args: &ToolArgs) -> bool {
    matches!(args.reach(), CallReach::Path { .. })
}

/// A grant list with its index: what a broker holds from one load of the grants folder to
/// the next. It reads as the list itself.
#[derive(Debug, Clone, Default)]
pub struct IndexedGrants {
    grants: Vec<Grant>,
    index: GrantIndex,
}

impl IndexedGrants {
    /// `grants`, indexed.
    pub fn new(grants: Vec<Grant>) -> IndexedGrants {
        let index = GrantIndex::new(&grants);
        IndexedGrants { grants, index }
    }

    /// The index of the list.
    pub fn index(&self) -> &GrantIndex {
        &self.index
    }
}

impl std::ops::Deref for IndexedGrants {
    type Target = [Grant];

    fn deref(&self) -> &[Grant] {
        &self.grants
    }
}
