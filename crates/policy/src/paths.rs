//! Resolving paths as the kernel walks them, so that what a call names, what a grant names and
//! what finally runs meet on the same spelling. This reads the file system (metadata and links)
//! and nothing else.

use std::path::{Component, Path, PathBuf};

pub use nettools::args::MAX_PATH_BYTES;

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
                // `out` is always a real path, so a component that is not a link keeps it one:
                // only a link needs the kernel's walk (one `lstat` a component otherwise).
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => match next.canonicalize() {
                        Ok(real) => out = real,
                        Err(_) => return Err(ResolveError::DanglingLink(shown())),
                    },
                    Ok(_) => out = next,
                    Err(_) => missing.push(name),
                }
            }
        }
    }
    out.extend(missing);
    Ok(out)
}
