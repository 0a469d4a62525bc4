//! Trusted places: files and folders that a program running outside any box reads as its
//! configuration or runs (git's configuration and hooks, shell start-up files, `~/.ssh`, the
//! agents' and editors' settings, folders on `PATH`, …), listed once in [`table::PLACES`].
//!
//! Each is read-only in every box and refused to the write tools unless a grant's `paths` name
//! it literally (the place itself or a path below it; a broader folder or a `**` glob is not
//! enough). A place is protected as spelled *and* through what it names: a write that
//! reaches a place's symbolic-link target changes the place, and a box keeps both (or refuses
//! to start where it cannot, see `sandbox`).

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::git;
use crate::paths::resolve;

mod pins;
pub mod table;

pub use pins::BoxPins;
pub use table::{Anchor, Kind, PLACES, TrustedPlace};

/// A trusted place a write changes: the place as a grant must name it (resolved, symbolic
/// links followed) and what reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// The place, resolved.
    pub place: PathBuf,
    /// The program that reads or runs it outside any box.
    pub read_by: &'static str,
}

/// The table's places for one owner: their home folder and configuration folders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedPlaces {
    /// The owner's home folder, resolved; `None`: only the workspace rows apply.
    home: Option<PathBuf>,
    /// `~/.config` and `$XDG_CONFIG_HOME` (when set and absolute), as spelled, each once.
    config: Vec<PathBuf>,
}

impl TrustedPlaces {
    /// The places of an owner whose home is `home` and whose `$XDG_CONFIG_HOME` is
    /// `xdg_config_home`.
    pub fn new(home: &Path, xdg_config_home: Option<&Path>) -> TrustedPlaces {
        let home = resolved_or_as_is(home);
        let mut config = vec![home.join(".config")];
        if let Some(xdg) = xdg_config_home.filter(|x| x.is_absolute()) {
            let xdg = lexical(xdg);
            if !config.contains(&xdg) {
                config.push(xdg);
            }
        }
        TrustedPlaces {
            home: Some(home),
            config,
        }
    }

    /// The owner's places (rows anchored in the home or configuration folder), as spelled
    /// from those folders; a `*` component expanded to the entries that exist.
    pub fn owner_places(&self) -> Vec<(PathBuf, &'static TrustedPlace)> {
        let mut out = Vec::new();
        for row in PLACES {
            let bases: &[PathBuf] = match row.anchor {
                Anchor::Home => self.home.as_slice(),
                Anchor::Config => &self.config,
                Anchor::Workspace => continue,
            };
            for base in bases {
                for place in expand(base, row.path) {
                    out.push((place, row));
                }
            }
        }
        out
    }

    /// The trusted place a write to `resolved` changes, if any. `spelled` is the path as the
    /// call wrote it (absolute, links not followed): a place is found on either spelling, and
    /// through the target of an owner's place that is a symbolic link.
    pub fn place_of(&self, spelled: Option<&Path>, resolved: &Path) -> Option<Reached> {
        let spelled = spelled.map(lexical);
        for path in std::iter::once(resolved).chain(spelled.as_deref()) {
            if let Some(root) = git::git_root(path) {
                return Some(reached(&root, "git"));
            }
            if let Some(found) = self.spelled_place(path) {
                return Some(found);
            }
        }
        // A write through what an owner's place names changes the place.
        self.owner_places().into_iter().find_map(|(place, row)| {
            let real = std::fs::canonicalize(&place).ok()?;
            (real != place && resolved.starts_with(&real)).then_some(Reached {
                place: real,
                read_by: row.read_by,
            })
        })
    }

    /// The place `path` lies in by its spelling alone: below an owner's place, or where a
    /// workspace row's components appear in it.
    fn spelled_place(&self, path: &Path) -> Option<Reached> {
        for row in PLACES {
            let bases: &[PathBuf] = match row.anchor {
                Anchor::Home => self.home.as_slice(),
                Anchor::Config => &self.config,
                Anchor::Workspace if row.kind == Kind::GitDir => continue,
                Anchor::Workspace => {
                    if let Some(place) = workspace_match(path, row.path) {
                        return Some(reached(&place, row.read_by));
                    }
                    continue;
                }
            };
            for base in bases {
                let Ok(rest) = path.strip_prefix(base) else {
                    continue;
                };
                let names: Vec<&OsStr> = rest.iter().collect();
                if let Some(n) = prefix_len(&names, row.path) {
                    let place = names[..n].iter().fold(base.clone(), |p, c| p.join(c));
                    return Some(reached(&place, row.read_by));
                }
            }
        }
        None
    }
}

fn reached(place: &Path, read_by: &'static str) -> Reached {
    Reached {
        place: resolved_or_as_is(place),
        read_by,
    }
}

fn resolved_or_as_is(path: &Path) -> PathBuf {
    resolve(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `path` made absolute by its components alone (`..` taken lexically, links not followed).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// Whether `name` matches one pattern component (ASCII case ignored, one `*` at most).
fn component_matches(pattern: &str, name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    match pattern.split_once('*') {
        None => name.eq_ignore_ascii_case(pattern),
        Some((head, tail)) => {
            let lower = name.to_ascii_lowercase();
            lower.len() >= head.len() + tail.len()
                && lower.starts_with(&head.to_ascii_lowercase())
                && lower.ends_with(&tail.to_ascii_lowercase())
        }
    }
}

/// How many of `names` a row's `path` takes when it matches their start.
fn prefix_len(names: &[&OsStr], pattern: &str) -> Option<usize> {
    let parts: Vec<&str> = pattern.split('/').collect();
    (names.len() >= parts.len()
        && parts
            .iter()
            .zip(names)
            .all(|(part, name)| component_matches(part, name)))
    .then_some(parts.len())
}

/// The first place in `path` where a workspace row's components appear: the path up to them.
fn workspace_match(path: &Path, pattern: &str) -> Option<PathBuf> {
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    (0..names.len()).find_map(|start| {
        let n = prefix_len(&names[start..], pattern)?;
        Some(
            names[..start + n]
                .iter()
                .fold(PathBuf::from("/"), |p, c| p.join(c)),
        )
    })
}

/// `base` joined with a row's `path`, a `*` component expanded to the entries that exist.
fn expand(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut out = vec![base.to_path_buf()];
    for part in pattern.split('/') {
        if !part.contains('*') {
            out.iter_mut().for_each(|p| p.push(part));
            continue;
        }
        out = out
            .iter()
            .filter_map(|folder| std::fs::read_dir(folder).ok())
            .flat_map(|entries| entries.flatten())
            .filter(|entry| component_matches(part, &entry.file_name()))
            .map(|entry| entry.path())
            .collect();
        out.sort();
    }
    out
}

#[cfg(test)]
mod tests;
