//! Where a call on a path that does not exist could go instead: the nearest folder that does
//! exist and, when one of its entries has a name close to the missing one, that entry ("did
//! you mean …?"). Only what the same call could be allowed on is named: each place is decided
//! as the call itself would be (grants, deny grants, boxmaker's own folders), so no name
//! outside what the grants let the caller reach is shown. The work is bounded: at most
//! [`ENTRIES_LOOKED_AT`] entries of the folder are read.

use std::path::{Path, PathBuf};

use proto::Timestamp;

use policy::args::ToolName;
use policy::decide::{Allowed, Decision, Labels, Protected};
use policy::grants::Grant;
use policy::shell::PathEnforcement;

/// The most entries of a folder read to find a close name.
pub const ENTRIES_LOOKED_AT: usize = 4096;

/// The most guesses decided before giving up on a sibling.
const GUESSES: usize = 3;

/// Names longer than this many characters are not compared.
const MAX_NAME_CHARS: usize = 100;

/// The tools whose "does not exist" gets a hint.
const TOOLS: [ToolName; 5] = [
    ToolName::ReadFile,
    ToolName::ListFiles,
    ToolName::EditFile,
    ToolName::Grep,
    ToolName::Glob,
];

/// What the call may be decided against again: the grants, labels and walls it was decided
/// with, and boxmaker's folders.
pub struct Reach<'a> {
    /// The grants in force.
    pub grants: &'a [Grant],
    /// The session's labels.
    pub labels: Labels,
    /// boxmaker's own folders.
    pub protected: &'a Protected,
    /// The walls of the broker's runner.
    pub walls: PathEnforcement,
}

/// The hint to add to the failure of `allowed`'s call when its path does not exist
/// (`; the nearest existing folder is …; did you mean …?`), or `None` when it exists, the tool
/// is not one of [`TOOLS`], or no existing folder above it may be named.
pub fn hint(allowed: &Allowed, reach: &Reach<'_>) -> Option<String> {
    if !TOOLS.contains(&allowed.args.tool()) {
        return None;
    }
    let path = Path::new(allowed.args.path()?);
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        _ => return None,
    }
    let may = |place: &Path| {
        let mut args = allowed.args.clone();
        let Some(slot) = args.path_mut() else {
            return false;
        };
        *slot = place.to_string_lossy().into_owned();
        let decision = policy::decide::decide_in(
            &args,
            reach.grants,
            reach.labels,
            Timestamp::now(),
            reach.protected,
            reach.walls,
        );
        !matches!(decision, Decision::Deny(_))
    };
    let (folder, missing) = existing_folder(path)?;
    if !may(folder) {
        return None;
    }
    let mut hint = format!("; the nearest existing folder is {}", folder.display());
    let (first, rest) = missing.split_first()?;
    let entries = std::fs::read_dir(folder).ok()?;
    let names = entries
        .map_while(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned());
    let rest: PathBuf = rest.iter().collect();
    for name in closest(names, first, ENTRIES_LOOKED_AT) {
        let sibling = folder.join(&name);
        let whole = sibling.join(&rest);
        let guess = if !rest.as_os_str().is_empty() && std::fs::symlink_metadata(&whole).is_ok() {
            whole
        } else {
            sibling
        };
        if may(&guess) {
            hint.push_str(&format!("; did you mean {}?", guess.display()));
            break;
        }
    }
    Some(hint)
}

/// The longest existing folder above `path`, and the names below it down to `path`'s end; `None`
/// when a file (not a folder) is met first.
fn existing_folder(path: &Path) -> Option<(&Path, Vec<String>)> {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        missing.push(at.file_name()?.to_string_lossy().into_owned());
        at = at.parent()?;
        match std::fs::symlink_metadata(at) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => return None,
            Err(_) => continue,
        }
    }
    missing.reverse();
    Some((at, missing))
}

/// Up to [`GUESSES`] of the first `looked_at` `names` closest to `missing` (the closest first,
/// then by name), each close enough to be a slip: a difference of case, or a few characters
/// typed wrong, left out, added or swapped.
pub fn closest(
    names: impl Iterator<Item = String>,
    missing: &str,
    looked_at: usize,
) -> Vec<String> {
    let wanted: Vec<char> = missing.to_lowercase().chars().collect();
    if wanted.is_empty() || wanted.len() > MAX_NAME_CHARS {
        return Vec::new();
    }
    let limit = match wanted.len() {
        0..=3 => 1,
        4..=7 => 2,
        _ => 3,
    };
    let mut found: Vec<(usize, String)> = names
        .take(looked_at)
        .filter(|name| name != missing)
        .filter_map(|name| {
            let other: Vec<char> = name.to_lowercase().chars().collect();
            if other.len() > MAX_NAME_CHARS || other.len().abs_diff(wanted.len()) > limit {
                return None;
            }
            let d = distance(&wanted, &other);
            (d <= limit).then_some((d, name))
        })
        .collect();
    found.sort();
    found.truncate(GUESSES);
    found.into_iter().map(|(_, name)| name).collect()
}

/// The edit distance between `a` and `b` (a character typed wrong, left out or added, or two
/// neighbours swapped, each count one).
fn distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 0..=a.len() {
        rows[at(i, 0)] = i;
    }
    for j in 0..=b.len() {
        rows[at(0, j)] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[at(i - 1, j)] + 1)
                .min(rows[at(i, j - 1)] + 1)
                .min(rows[at(i - 1, j - 1)] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[at(i - 2, j - 2)] + 1);
            }
            rows[at(i, j)] = best;
        }
    }
    rows[at(a.len(), b.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> impl Iterator<Item = String> {
        list.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn slips_of_a_few_characters_are_close_and_other_names_are_not() {
        let list = ["main.rs", "lib.rs", "Cargo.toml", "README.md", "tests"];
        assert_eq!(closest(names(&list), "mian.rs", 100), ["main.rs"]);
        assert_eq!(closest(names(&list), "main.py", 100), ["main.rs"]);
        assert_eq!(closest(names(&list), "cargo.toml", 100), ["Cargo.toml"]);
        assert_eq!(closest(names(&list), "test", 100), ["tests"]);
        assert!(closest(names(&list), "server.go", 100).is_empty());
    }

    #[test]
    fn only_the_entries_looked_at_are_read() {
        let mut read = 0usize;
        let endless = std::iter::repeat_with(|| {
            read += 1;
            format!("entry-{read}")
        });
        let found = closest(endless, "mian.rs", ENTRIES_LOOKED_AT);
        assert!(found.is_empty());
        assert_eq!(read, ENTRIES_LOOKED_AT);
    }

    #[test]
    fn the_closest_comes_first() {
        let list = ["maim.rs", "main.rs", "other.rs"];
        assert_eq!(
            closest(names(&list), "mian.rs", 100),
            ["main.rs", "maim.rs"]
        );
    }
}
