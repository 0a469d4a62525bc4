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
    let folder = resolve(&expanded).map_err(|e| format!("path {written:?}: {e}"))?;
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

/// The longest path a call or a grant may name, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// Why a path cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The path is not absolute.
    #[error("{0} is not an absolute path")]
    NotAbsolute(String),
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error("the path is {0} bytes, longer than the {MAX_PATH_BYTES} a path may have")]
    TooLong(usize),
    /// A `..` follows a component that does not exist, so where it leads cannot be known.
    #[error("{0} has `..` after a folder that does not exist")]
    DotDotAfterMissing(String),
    /// A symbolic link on the way leads nowhere.
    #[error("{0} goes through a symbolic link that leads nowhere")]
    DanglingLink(String),
}

/// `path` as the kernel would walk it: component by component, every symbolic link followed
/// and every `..` taken from the real folder it is in, for as long as the path exists; the
/// components that do not exist yet are appended as they are. A `..` after one of those, or a
/// dangling symbolic link, is an error, because where it leads cannot be decided now.
pub fn resolve(path: &Path) -> Result<PathBuf, ResolveError> {
    let shown = || path.display().to_string();
    let length = path.as_os_str().len();
    if length > MAX_PATH_BYTES {
        return Err(ResolveError::TooLong(length));
    }
    if !path.is_absolute() {
        return Err(ResolveError::NotAbsolute(shown()));
    }
    let mut out = PathBuf::from("/");
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir if !missing.is_empty() => {
                return Err(ResolveError::DotDotAfterMissing(shown()));
            }
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) if !missing.is_empty() => missing.push(name),
            Component::Normal(name) => {
                let next = out.join(name);
                match std::fs::symlink_metadata(&next) {
                    Ok(_) => match next.canonicalize() {
                        Ok(real) => out = real,
                        Err(_) => return Err(ResolveError::DanglingLink(shown())),
                    },
                    Err(_) => missing.push(name),
                }
            }
        }
    }
    out.extend(missing);
    Ok(out)
}
