//! [`Names`]: the spelling of each tool name that MCP clients see, so that a client passing
//! MCP names through to a strict model provider (OpenAI-style function names must match
//! `^[a-zA-Z0-9_-]{1,64}$`) is not refused. The broker, the grants, `bx approvals` and the
//! audit log keep the owner's spelling (`server.tool` for a downstream server's tool); only
//! the MCP front spells it otherwise, and a call by either spelling reaches the same tool.
//!
//! A name that already matches the pattern keeps its spelling. Any other is spelled with the
//! server and the tool joined by `__` instead of the first `.`, and every other character
//! outside `[a-zA-Z0-9_-]` made `_` (`fs.read_text_file` becomes `fs__read_text_file`). A
//! spelling over 64 characters, or one that another name also has (a name of that spelling,
//! or another name spelled the same), is cut to 55 characters and given `_` and the first 8
//! hex digits of the SHA-256 of the owner's spelling (more digits in the unlikely case those
//! collide too): every name involved in a collision is suffixed, so the spelling depends on
//! the catalog, never on its order.

use std::collections::{HashMap, HashSet};

/// The longest name a strict provider takes.
pub const MAX_LEN: usize = 64;

/// How many hex digits of the hash a suffixed spelling carries at least.
const HASH_DIGITS: usize = 8;

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_strict(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The spellings of one catalog's names, both ways.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// The owner's spelling of each name spelled otherwise, by the MCP spelling.
    owners: HashMap<String, String>,
    /// The MCP spelling of each name spelled otherwise, by the owner's spelling.
    listed: HashMap<String, String>,
}

impl Names {
    /// The spellings of `names` (the owner's spellings of one catalog's tools).
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Names {
        let names: Vec<&str> = names.into_iter().collect();
        let mut used: HashSet<String> = names
            .iter()
            .filter(|n| is_strict(n))
            .map(|n| (*n).to_string())
            .collect();
        let mut plain: HashMap<String, usize> = HashMap::new();
        for name in names.iter().filter(|n| !is_strict(n)) {
            *plain.entry(plain_spelling(name)).or_default() += 1;
        }
        let mut spelled = Names::default();
        let mut rest: Vec<&str> = names.iter().copied().filter(|n| !is_strict(n)).collect();
        rest.sort_unstable();
        rest.dedup();
        for name in rest {
            let plain_name = plain_spelling(name);
            let shared = plain.get(&plain_name).copied().unwrap_or(0) > 1;
            let listed = if plain_name.len() > MAX_LEN || shared || used.contains(&plain_name) {
                suffixed(name, &plain_name, &used)
            } else {
                plain_name
            };
            used.insert(listed.clone());
            spelled.owners.insert(listed.clone(), name.to_string());
            spelled.listed.insert(name.to_string(), listed);
        }
        spelled
    }

    /// How MCP clients see the tool the owner spells `name`.
    pub fn listed<'a>(&'a self, name: &'a str) -> &'a str {
        self.listed.get(name).map_or(name, String::as_str)
    }

    /// The owner's spelling of the tool MCP clients see as `listed`, if it is spelled
    /// otherwise.
    pub fn owners(&self, listed: &str) -> Option<&str> {
        self.owners.get(listed).map(String::as_str)
    }
}

/// `name` with the first `.` made `__` and every other character outside the pattern `_`.
fn plain_spelling(name: &str) -> String {
    let clean = |part: &str| -> String {
        part.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let spelled = match name.split_once('.') {
        Some((server, tool)) => format!("{}__{}", clean(server), clean(tool)),
        None => clean(name),
    };
    if spelled.is_empty() {
        "_".to_string()
    } else {
        spelled
    }
}

/// `plain` cut to fit and given `_` and the hash of `name`: 8 hex digits, or more when that
/// spelling is already `used`.
fn suffixed(name: &str, plain: &str, used: &HashSet<String>) -> String {
    let digest = proto::ids::sha256_hex(name.as_bytes());
    let mut digits = HASH_DIGITS;
    loop {
        let hash = digest.get(..digits).unwrap_or(&digest);
        // The plain spelling is ASCII, so any byte is a character boundary.
        let keep = plain.len().min(MAX_LEN - 1 - hash.len());
        let spelled = format!("{}_{hash}", plain.get(..keep).unwrap_or(plain));
        if !used.contains(&spelled) || digits >= digest.len() || keep == 0 {
            return spelled;
        }
        digits += 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_matches_the_strict_pattern_and_maps_back_to_the_owners_spelling() {
        let long = format!("server.{}", "t".repeat(80));
        let catalog = [
            "read_file",
            "fs.read_text_file",
            "fs.read.text",
            "fs.read_text",
            "fs__read_text_file_x",
            "x y.z/w",
            "",
            long.as_str(),
            "probe.a_b",
            "probe.a.b",
            "probe__a_b",
        ];
        let names = Names::of(catalog);
        let mut seen = HashSet::new();
        for name in catalog {
            let listed = names.listed(name);
            assert!(is_strict(listed), "{name:?} is listed as {listed:?}");
            assert!(seen.insert(listed.to_string()), "{listed} twice");
            if listed != name {
                assert_eq!(names.owners(listed), Some(name));
            }
        }
        assert_eq!(names.listed("read_file"), "read_file");
        assert_eq!(names.listed("fs.read_text_file"), "fs__read_text_file");
        // A collision suffixes every name involved, and a taken spelling is never reused.
        assert!(names.listed("probe.a_b").starts_with("probe__a_b_"));
        assert!(names.listed("probe.a.b").starts_with("probe__a_b_"));
        assert_eq!(names.listed("probe__a_b"), "probe__a_b");
        assert_eq!(names.listed(&long).len(), MAX_LEN);
    }

    #[test]
    fn spellings_depend_on_the_catalog_not_its_order() {
        let one = Names::of(["b.x", "a.y", "a.y_", "c.z.z", "c.z_z"]);
        let two = Names::of(["c.z_z", "c.z.z", "a.y_", "a.y", "b.x"]);
        for name in ["b.x", "a.y", "a.y_", "c.z.z", "c.z_z"] {
            assert_eq!(one.listed(name), two.listed(name), "{name}");
        }
    }
}
