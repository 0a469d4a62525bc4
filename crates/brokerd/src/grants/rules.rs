//! The constraints a grant names: paths (folders and globs) and hosts, and path resolution.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use crate::args::{split_host_port, valid_host};

/// A path a grant names: a folder (covering everything below it) or a glob.
#[derive(Debug, Clone)]
pub struct PathRule {
    /// As the owner wrote it.
    pub written: String,
    kind: PathKind,
}

#[derive(Debug, Clone)]
enum PathKind {
    Folder(PathBuf),
    Glob(GlobMatcher),
}

impl PathRule {
    /// Whether `resolved` (absolute, without `..` or symbolic links) is this path or below it.
    /// A folder never covers a sibling that shares its prefix (`/a/notes` does not cover
    /// `/a/notes-private`); a glob covers what it matches and everything below that.
    pub fn covers(&self, resolved: &Path) -> bool {
        match &self.kind {
            PathKind::Folder(folder) => resolved.starts_with(folder),
            PathKind::Glob(glob) => resolved.ancestors().any(|p| glob.is_match(p)),
        }
    }

    /// The folder to make available for this rule: the folder itself, or a glob's longest
    /// literal leading folder.
    pub fn base(&self) -> PathBuf {
        match &self.kind {
            PathKind::Folder(folder) => folder.clone(),
            PathKind::Glob(glob) => {
                let mut base = PathBuf::from("/");
                for component in Path::new(glob.glob().glob()).components() {
                    let text = component.as_os_str().to_string_lossy();
                    if text.contains(['*', '?', '[', '{']) {
                        break;
                    }
                    base.push(component);
                }
                base
            }
        }
    }
}

/// A host a grant names: exactly, or every subdomain of a domain (`*.example.org`, which does
/// not cover `example.org` itself), on one port (443 unless written `host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// As the owner wrote it.
    pub written: String,
    /// The host, lower case; for a wildcard, the domain after `*.`.
    pub host: String,
    /// Whether it names subdomains of `host` rather than `host` itself.
    pub wildcard: bool,
    /// The port.
    pub port: u16,
}

impl HostRule {
    /// Whether `host` (lower case) on `port` is covered.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        if self.wildcard {
            host.strip_suffix(&self.host)
                .is_some_and(|head| head.ends_with('.') && head.len() > 1)
        } else {
            host == self.host
        }
    }
}

/// Reads one `paths` entry: `~` expanded, absolute, a folder (resolved when it exists) or a
/// glob matched against resolved paths.
pub fn path_rule(written: &str, home: &Path) -> Result<PathRule, String> {
    let expanded = if written == "~" {
        home.to_path_buf()
    } else if let Some(rest) = written.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(written)
    };
    if !expanded.is_absolute() {
        return Err(format!(
            "path {written:?} must be absolute or start with ~/"
        ));
    }
    let text = expanded.to_string_lossy().into_owned();
    if text.contains(['*', '?', '[', '{']) {
        let glob = GlobBuilder::new(&text)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("path {written:?} is not a valid glob: {e}"))?;
        return Ok(PathRule {
            written: written.to_string(),
            kind: PathKind::Glob(glob.compile_matcher()),
        });
    }
    let folder = resolve(&expanded);
    Ok(PathRule {
        written: written.to_string(),
        kind: PathKind::Folder(folder),
    })
}

/// Reads one `hosts` entry.
pub fn host_rule(written: &str) -> Result<HostRule, String> {
    let (host, port) =
        split_host_port(written.trim()).map_err(|why| format!("host {written:?} has {why}"))?;
    let (wildcard, host) = match host.strip_prefix("*.") {
        Some(domain) => (true, domain.to_string()),
        None => (false, host),
    };
    let valid = valid_host(&host);
    if !valid {
        return Err(format!(
            "host {written:?} must be a host name, an IP address, or *. and a domain"
        ));
    }
    Ok(HostRule {
        written: written.to_string(),
        host,
        wildcard,
        port,
    })
}

/// `path` with symbolic links and `..` resolved as far as it exists, and the rest (which does
/// not exist yet) cleaned lexically.
pub fn resolve(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                push_lexically(&mut out, Path::new(part));
            }
            return out;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => {
                // Nothing of it exists (or it ends in `..`): clean it lexically.
                let mut out = PathBuf::from("/");
                push_lexically(&mut out, path);
                return out;
            }
        }
    }
}

fn push_lexically(out: &mut PathBuf, part: &Path) {
    for component in part.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}
