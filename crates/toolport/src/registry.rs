//! [`Registry`]: the tools that exist, in a fixed order; the core ones are in every request's
//! `tools` array, the others are found through `find_tool`.

use proto::ToolSchema;

use crate::rank;
use crate::schemas::{
    CALL_TOOL, FIND_TOOL, call_tool_schema, clock_schema, echo_schema, find_tool_schema,
    http_fetch_schema, read_file_schema, shell_schema, write_file_schema,
};

/// One tool the model can learn about; `core` tools are in every request's `tools` array.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What the model reads.
    pub schema: ToolSchema,
    /// Sent in the `tools` array (true) or found through `find_tool` (false).
    pub core: bool,
}

/// The tools that exist, in a fixed order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    /// Each entry's name and description in lower case, for [`Registry::find`].
    lowered: Vec<(String, String)>,
    index: rank::Index,
}

impl Registry {
    /// A registry of `entries`, in this order.
    pub fn new(entries: Vec<Entry>) -> Registry {
        let index = rank::Index::new(entries.iter().map(|e| &e.schema));
        let lowered = entries
            .iter()
            .map(|e| {
                (
                    e.schema.name.to_lowercase(),
                    e.schema.description.to_lowercase(),
                )
            })
            .collect();
        Registry {
            entries,
            lowered,
            index,
        }
    }

    /// The test registry: `clock` (core) and `echo`. `echo` exists only in
    /// [`crate::FakeTools`] and in recorded conversations; a loopd that talks to the broker
    /// never uses this registry.
    pub fn m2b() -> Registry {
        Registry::new(vec![core(clock_schema()), found(echo_schema())])
    }

    /// Seed M3a/16's registry, named as it spells it: `clock` (core), then `read_file`,
    /// `write_file`, `shell`, `http_fetch`, the broker's tools as that seed knew them. A port
    /// with a catalog (the broker's `list_tools`) puts that behind the core tools instead
    /// ([`Registry::with_catalog`]).
    pub fn m3a() -> Registry {
        Registry::new(vec![
            core(clock_schema()),
            found(read_file_schema()),
            found(write_file_schema()),
            found(shell_schema()),
            found(http_fetch_schema()),
        ])
    }

    /// The demo's registry: [`Registry::m3a`] and `echo`, which [`crate::FakeTools`] answers.
    pub fn demo() -> Registry {
        let mut entries = Registry::m3a().entries;
        entries.push(found(echo_schema()));
        Registry::new(entries)
    }

    /// The `tools` array of every request: the core entries, then `find_tool`, then `call_tool`.
    pub fn core_schemas(&self) -> Vec<ToolSchema> {
        let mut schemas: Vec<ToolSchema> = self
            .entries
            .iter()
            .filter(|e| e.core)
            .map(|e| e.schema.clone())
            .collect();
        schemas.push(find_tool_schema());
        schemas.push(call_tool_schema());
        schemas
    }

    /// This registry's core entries, then `catalog`'s tools (those not named like a core tool,
    /// `find_tool` or `call_tool`) as found through `find_tool`, in the catalog's order.
    pub fn with_catalog(&self, catalog: Vec<ToolSchema>) -> Registry {
        let mut entries: Vec<Entry> = self.entries.iter().filter(|e| e.core).cloned().collect();
        let taken: Vec<String> = entries
            .iter()
            .map(|e| e.schema.name.clone())
            .chain([FIND_TOOL.to_string(), CALL_TOOL.to_string()])
            .collect();
        entries.extend(
            catalog
                .into_iter()
                .filter(|schema| !taken.contains(&schema.name))
                .map(found),
        );
        Registry::new(entries)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.schema.name == name)
    }

    /// Every entry, in registry order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The schemas whose name or description contains `query`, ignoring case, in registry
    /// order. An empty query matches nothing.
    pub fn find(&self, query: &str) -> Vec<&ToolSchema> {
        self.find_positions(query)
            .into_iter()
            .filter_map(|at| self.entries.get(at).map(|e| &e.schema))
            .collect()
    }

    fn find_positions(&self, query: &str) -> Vec<usize> {
        if query.is_empty() {
            return Vec::new();
        }
        let needle = query.to_lowercase();
        self.lowered
            .iter()
            .enumerate()
            .filter(|(_, (name, description))| {
                name.contains(&needle) || description.contains(&needle)
            })
            .map(|(at, _)| at)
            .collect()
    }

    /// What `find_tool` lists: [`Registry::find`]'s matches first, then the further tools a BM25
    /// ranking finds, best first; at most `limit`. The second value counts the matches left out.
    pub fn search(&self, query: &str, limit: usize) -> (Vec<&ToolSchema>, usize) {
        let mut positions = self.find_positions(query);
        let mut listed = vec![false; self.entries.len()];
        for &at in &positions {
            if let Some(seen) = listed.get_mut(at) {
                *seen = true;
            }
        }
        for at in self.index.rank(query) {
            if let Some(seen) = listed.get_mut(at)
                && !*seen
            {
                *seen = true;
                positions.push(at);
            }
        }
        let left_out = positions.len().saturating_sub(limit);
        let shown = positions
            .into_iter()
            .take(limit)
            .filter_map(|at| self.entries.get(at).map(|e| &e.schema))
            .collect();
        (shown, left_out)
    }
}

fn core(schema: ToolSchema) -> Entry {
    Entry { schema, core: true }
}

fn found(schema: ToolSchema) -> Entry {
    Entry {
        schema,
        core: false,
    }
}
