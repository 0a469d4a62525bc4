//! The owner's acceptance criteria of a code-mode conversation (`loopd chat --criteria FILE`):
//! read from the owner's file (one criterion a line), kept in the conversation's folder as
//! `criteria.json` (mode 0600, replaced whole through a rename), so a resumed session keeps
//! them and their verdicts.
//!
//! The model cannot edit them: no tool of loopd's reaches them, and only a verdict of the
//! verifier role ([`crate::verify`]) changes a criterion's state, the only one that may mark a
//! criterion `passed`. This module holds the types the turn's events carry too, so it depends
//! on nothing of the turn loop.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file in a conversation's folder that keeps its criteria.
pub const CRITERIA_FILE: &str = "criteria.json";
/// The most criteria one file may hold.
pub const MAX_CRITERIA: usize = 64;
/// The most characters of one criterion.
pub const MAX_CRITERION_CHARS: usize = 1000;

/// Who speaks in a code-mode turn (the event `role` says when it changes), and how a
/// code-mode turn's verification ended (`verify_done`): the types the broker passes on to the
/// owner too.
pub use proto::{AgentRole, VerifyOutcome};

/// How isolated the verifier's context is, measured on the request it is sent
/// (the seed's `ctx_isolated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtxIsolated {
    /// Messages in the verifier's request (its system prompt and one message of facts).
    pub messages: usize,
    /// Bytes of those messages' text.
    pub bytes: usize,
    /// Tools the verifier is given: always 0.
    pub tools: usize,
    /// Messages of the builder's conversation at that moment, none of which the verifier sees.
    pub builder_messages: usize,
}

/// Where a criterion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriterionState {
    /// Not yet judged, or judged without a verdict.
    Open,
    /// The verifier found it met.
    Passed,
    /// The verifier found it not met (the finding says why).
    Failed,
}

/// One criterion and its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Its number, from 1, in the owner's order.
    pub id: usize,
    /// The owner's words.
    pub text: String,
    /// Where it stands.
    pub state: CriterionState,
    /// The verifier's last finding on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<String>,
}

impl Criterion {
    /// Whether it still needs work or a verdict (not passed).
    pub fn is_open(&self) -> bool {
        self.state != CriterionState::Passed
    }
}

/// A conversation's criteria, in the owner's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// The criteria.
    pub criteria: Vec<Criterion>,
    /// Verification passes run on them in this conversation, every turn's (the verifier's
    /// message numbers its pass with it).
    #[serde(default)]
    pub passes: usize,
}

/// Why criteria could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum CriteriaError {
    /// The owner's file cannot be read (missing, unreadable, not UTF-8).
    #[error("cannot read --criteria {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: io::Error,
    },
    /// The owner's file holds no criterion.
    #[error("--criteria {0} holds no criterion: write one criterion a line")]
    Empty(String),
    /// The owner's file holds something loopd does not take.
    #[error("--criteria {path}: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, with the line.
        detail: String,
    },
    /// The conversation's `criteria.json` is damaged.
    #[error("{path}: {detail}")]
    Damaged {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// The conversation's `criteria.json` cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

impl Criteria {
    /// Reads the owner's file: one criterion a line, blank lines skipped, every criterion open.
    pub fn from_file(path: &Path) -> Result<Criteria, CriteriaError> {
        let shown = path.display().to_string();
        let text = fs::read_to_string(path).map_err(|source| CriteriaError::Read {
            path: shown.clone(),
            source,
        })?;
        Criteria::parse(&text).map_err(|detail| match detail {
            None => CriteriaError::Empty(shown.clone()),
            Some(detail) => CriteriaError::Invalid {
                path: shown.clone(),
                detail,
            },
        })
    }

    /// Reads criteria from `text`, one a line. `Err(None)`: there is none; `Err(Some(..))`:
    /// what is wrong, with the line.
    pub fn parse(text: &str) -> Result<Criteria, Option<String>> {
        let mut criteria = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line.chars().any(char::is_control) {
                return Err(Some(format!("line {}: holds a control character", n + 1)));
            }
            if line.chars().count() > MAX_CRITERION_CHARS {
                return Err(Some(format!(
                    "line {}: a criterion is at most {MAX_CRITERION_CHARS} characters",
                    n + 1
                )));
            }
            if criteria.len() == MAX_CRITERIA {
                return Err(Some(format!(
                    "line {}: at most {MAX_CRITERIA} criteria",
                    n + 1
                )));
            }
            criteria.push(Criterion {
                id: criteria.len() + 1,
                text: line.to_string(),
                state: CriterionState::Open,
                finding: None,
            });
        }
        if criteria.is_empty() {
            return Err(None);
        }
        Ok(Criteria {
            criteria,
            passes: 0,
        })
    }

    /// The criteria kept in the conversation folder `dir`, if it keeps any.
    pub fn load(dir: &Path) -> Result<Option<Criteria>, CriteriaError> {
        let path = dir.join(CRITERIA_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CriteriaError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        let damaged = |detail: String| CriteriaError::Damaged {
            path: path.display().to_string(),
            detail,
        };
        let criteria: Criteria = serde_json::from_str(&text).map_err(|e| damaged(e.to_string()))?;
        if criteria.criteria.is_empty() {
            return Err(damaged("holds no criterion".to_string()));
        }
        let numbered = criteria
            .criteria
            .iter()
            .enumerate()
            .all(|(i, c)| c.id == i + 1);
        if !numbered {
            return Err(damaged("criteria are not numbered 1, 2, 3, …".to_string()));
        }
        Ok(Some(criteria))
    }

    /// Keeps the criteria in the conversation folder `dir`: written to a temporary file
    /// (0600), synced, then renamed over `criteria.json`, so a crash leaves the old or the new.
    pub fn save(&self, dir: &Path) -> Result<(), CriteriaError> {
        let path = dir.join(CRITERIA_FILE);
        let temporary: PathBuf = dir.join(format!("{CRITERIA_FILE}.new"));
        let io_error = |source: io::Error| CriteriaError::Io {
            path: path.display().to_string(),
            source,
        };
        let json = serde_json::to_string_pretty(self).map_err(|e| io_error(io::Error::other(e)))?;
        let _ = fs::remove_file(&temporary);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(io_error)?;
        file.write_all(json.as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .and_then(|()| file.sync_all())
            .map_err(io_error)?;
        fs::rename(&temporary, &path).map_err(io_error)
    }

    /// The criteria not passed yet.
    pub fn open(&self) -> Vec<&Criterion> {
        self.criteria.iter().filter(|c| c.is_open()).collect()
    }

    /// Whether every criterion passed.
    pub fn all_passed(&self) -> bool {
        self.criteria.iter().all(|c| !c.is_open())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_criterion_a_line_blank_lines_skipped() {
        let criteria = Criteria::parse("  a.txt exists \n\n\tit says hi\n").unwrap();
        let texts: Vec<(usize, &str)> = criteria
            .criteria
            .iter()
            .map(|c| (c.id, c.text.as_str()))
            .collect();
        assert_eq!(texts, vec![(1, "a.txt exists"), (2, "it says hi")]);
        assert!(criteria.open().len() == 2 && !criteria.all_passed());
    }

    #[test]
    fn empty_overlong_and_control_characters_are_refused_with_the_line() {
        assert_eq!(Criteria::parse(" \n\n"), Err(None));
        let long = "x".repeat(MAX_CRITERION_CHARS + 1);
        let error = Criteria::parse(&format!("ok\n{long}"))
            .unwrap_err()
            .unwrap();
        assert!(error.starts_with("line 2:"), "{error}");
        let error = Criteria::parse("ok\nbad\u{1b}[2J").unwrap_err().unwrap();
        assert!(
            error.contains("line 2: holds a control character"),
            "{error}"
        );
        let many = "c\n".repeat(MAX_CRITERIA + 1);
        let error = Criteria::parse(&many).unwrap_err().unwrap();
        assert!(error.contains("at most 64 criteria"), "{error}");
    }

    #[test]
    fn saved_criteria_load_back_and_a_damaged_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Criteria::load(dir.path()).unwrap().is_none());
        let mut criteria = Criteria::parse("one\ntwo").unwrap();
        criteria.criteria[1].state = CriterionState::Failed;
        criteria.criteria[1].finding = Some("no file".into());
        criteria.save(dir.path()).unwrap();
        assert_eq!(Criteria::load(dir.path()).unwrap(), Some(criteria));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join(CRITERIA_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::write(dir.path().join(CRITERIA_FILE), "{\"criteria\":[]}").unwrap();
        let error = Criteria::load(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("criteria.json: holds no criterion"),
            "{error}"
        );
    }
}
