//! What the owner and the model read when a box cannot be built: one sentence per cause, with
//! the way out. A leaf: the box's builders (`sandboxed`, `warm`) both use it.

/// What a file call says when its box cannot be built.
pub fn box_error(e: sandbox::BoxError) -> String {
    match e {
        sandbox::BoxError::NoBubblewrap => no_bubblewrap(),
        e @ sandbox::BoxError::NoFileWalls(_) => format!(
            "{e}; or set [sandbox] file_walls = false in brokerd.toml to run shell and the file tools without file walls"
        ),
        e => format!("cannot build the file tool's box: {e}"),
    }
}

/// Why a call that needs the box fails where bubblewrap is missing, and the way out.
fn no_bubblewrap() -> String {
    format!(
        "{}; or set [sandbox] file_walls = false in brokerd.toml to run shell and the file tools without file walls",
        sandbox::BoxError::NoBubblewrap
    )
}
