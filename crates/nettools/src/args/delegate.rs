//! `delegate`'s argument shapes: open a child session with a task and the grant ids it may
//! use, or collect a child's report. No paths, no hosts: what the child may do is decided on
//! each of its own calls, under the grants named here (the broker checks they cover the
//! caller).

use serde::{Deserialize, Serialize};

use proto::text::cut_at_boundary;

pub use proto::tools::schemas::delegate_schema;

/// The most bytes of a task.
pub const TASK_CAP: usize = 16 * 1024;

/// The most grant ids a child may be given.
pub const MAX_GRANTS: usize = 64;

/// The model's `delegate` arguments, as written. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    grants: Option<Vec<String>>,
    #[serde(default)]
    collect: Option<String>,
}

/// What a `delegate` call asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DelegateArgs {
    /// Open a child session.
    Open {
        /// The child's task.
        task: String,
        /// The ids of the grants the child may use.
        grants: Vec<String>,
    },
    /// Wait for the report of the child session with this id.
    Collect {
        /// The child's session id.
        collect: String,
    },
}

/// Parses `delegate` arguments: either `task` with `grants` (at least one id, at most
/// [`MAX_GRANTS`], none repeated; the task cut to [`TASK_CAP`] bytes), or `collect` alone.
pub fn parse_delegate(arguments: &str) -> Result<DelegateArgs, String> {
    let written: Written = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
    match written {
        Written {
            task: Some(task),
            grants: Some(grants),
            collect: None,
        } => {
            if task.trim().is_empty() {
                return Err("the task is empty".to_string());
            }
            if grants.is_empty() {
                return Err("grants is empty: name at least one grant id".to_string());
            }
            if grants.len() > MAX_GRANTS {
                return Err(format!(
                    "{} grant ids; at most {MAX_GRANTS} are allowed",
                    grants.len()
                ));
            }
            for (i, id) in grants.iter().enumerate() {
                if grants[..i].contains(id) {
                    return Err(format!("grant id {id:?} is named twice"));
                }
            }
            Ok(DelegateArgs::Open {
                task: cut_at_boundary(&task, TASK_CAP).to_string(),
                grants,
            })
        }
        Written {
            task: None,
            grants: None,
            collect: Some(collect),
        } if !collect.trim().is_empty() => Ok(DelegateArgs::Collect { collect }),
        _ => Err(
            "give either task and grants (to open a child session) or collect alone (a child's session id)"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delegate_opens_with_task_and_grants_or_collects_alone() {
        assert_eq!(
            parse_delegate(r#"{"task":"read it","grants":["read-src"]}"#).unwrap(),
            DelegateArgs::Open {
                task: "read it".to_string(),
                grants: vec!["read-src".to_string()]
            }
        );
        assert_eq!(
            parse_delegate(r#"{"collect":"s-1"}"#).unwrap(),
            DelegateArgs::Collect {
                collect: "s-1".to_string()
            }
        );
        for bad in [
            r#"{"task":"x"}"#,
            r#"{"task":"x","grants":[]}"#,
            r#"{"task":" ","grants":["a"]}"#,
            r#"{"task":"x","grants":["a","a"]}"#,
            r#"{"task":"x","grants":["a"],"collect":"s-1"}"#,
            r#"{"collect":""}"#,
            r#"{"collect":"s-1","path":"/"}"#,
        ] {
            assert!(parse_delegate(bad).is_err(), "{bad}");
        }
    }
}
