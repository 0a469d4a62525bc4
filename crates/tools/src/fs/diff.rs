//! The unified diff every write reports.

use super::DIFF_LIMIT;

/// The unified diff of a write, or a summary when it would not be readable.
pub(crate) fn diff_of(
    path: &str,
    previous_size: Option<u64>,
    old: Option<Vec<u8>>,
    new: &str,
) -> String {
    let old_text = match (previous_size, old) {
        (None, _) => String::new(),
        (Some(_), Some(bytes)) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => return format!("(the old content of {path} is not UTF-8 text; not diffed)"),
        },
        (Some(size), None) => {
            return format!(
                "({path} was {size} bytes; too large to diff, now {} bytes)",
                new.len()
            );
        }
    };
    if new.len() > DIFF_LIMIT {
        return format!("({path} is now {} bytes; too large to diff)", new.len());
    }
    let old_name = if previous_size.is_some() {
        path
    } else {
        "/dev/null"
    };
    similar::TextDiff::from_lines(old_text.as_str(), new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, path)
        .to_string()
}
