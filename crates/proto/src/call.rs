//! One tool call and its answer.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// A tool call on its way to the broker: which session, which call, which tool, and the
/// arguments exactly as the model wrote them (JSON text, unparsed: the broker parses them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    /// The broker session this call belongs to.
    pub session: String,
    /// The call's number within its session; the same number sent again gets the same answer.
    pub call_id: u64,
    /// The tool the broker decides on (for `call_tool`, the target tool, never `call_tool`).
    pub tool: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// The confidentiality label of a result; a session's taint is the highest class it has seen.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Anyone may see it.
    #[default]
    Public,
    /// The owner's own data.
    Private,
    /// Data that must not leave the machine.
    Secret,
}

impl Class {
    /// The name used in grant files and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Public => "public",
            Class::Private => "private",
            Class::Secret => "secret",
        }
    }

    /// The class named `text` (as [`Class::as_str`] writes it).
    pub fn parse(text: &str) -> Option<Class> {
        match text {
            "public" => Some(Class::Public),
            "private" => Some(Class::Private),
            "secret" => Some(Class::Secret),
            _ => None,
        }
    }
}

/// Why the broker refused a call. Each reason has one model-facing sentence
/// ([`DenyReason::model_text`]), so this enum is deliberately exhaustive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenyReason {
    /// No grant covers the call.
    NoGrant,
    /// The grant that covers the call has expired.
    GrantExpired,
    /// The session has seen data of a higher class than the grant allows.
    TaintTooHigh,
    /// A deny grant covers the call.
    DeniedByGrant,
    /// The owner said no.
    ApprovalRefused,
    /// The owner did not answer in time.
    ApprovalExpired,
    /// The arguments do not fit the tool.
    InvalidArguments,
    /// The grant files have a problem, so no grant is loaded.
    GrantsInvalid,
    /// The decision could not be written to the audit log.
    AuditUnavailable,
    /// The session's state in the broker cannot be read.
    StateUnreadable,
    /// The call names a path inside boxmaker's own folders (config, grants, ledger, audit log,
    /// sessions, runtime), which no grant can open.
    ProtectedPath,
    /// The call would reach a loopback, private, link-local or metadata address that no grant
    /// names explicitly.
    UnsafeAddress,
    /// The session has received untrusted content and the grant refuses side effects after it.
    UntrustedInput,
    /// `write_file` or `edit_file` on an existing file this session has not read since it last
    /// changed.
    ReadBeforeWrite,
    /// A `shell` command that could destroy the machine or the owner's files (a recursive
    /// delete of a root, home or granted folder, a disk write, a fork bomb, a shutdown).
    CatastrophicCommand,
    /// A `shell` script that sends a command to the background with `&`.
    BackgroundCommand,
    /// A write to a trusted place (a file that a program running outside any box reads as its
    /// configuration or runs: git's configuration and hooks, shell start-up files, `~/.ssh`,
    /// an agent's or editor's settings) that no grant names literally.
    TrustedPlace,
}

impl DenyReason {
    /// The one sentence the model reads for this reason. The broker, loopd and the MCP front
    /// all render denials with it, so every client sees the same bytes. The first ten are the
    /// seed's sentences, byte for byte; there is no `_` arm, so a new reason cannot compile
    /// without its sentence.
    pub fn model_text(self) -> &'static str {
        match self {
            DenyReason::NoGrant => "Denied: no grant allows this call.",
            DenyReason::GrantExpired => "Denied: the grant for this call has expired.",
            DenyReason::TaintTooHigh => {
                "Denied: this session has seen data too sensitive for this call."
            }
            DenyReason::DeniedByGrant => "Denied: a grant forbids this call.",
            DenyReason::ApprovalRefused => "Denied: the owner refused this call.",
            DenyReason::ApprovalExpired => {
                "Denied: the approval request expired without an answer."
            }
            DenyReason::InvalidArguments => "Denied: the arguments are not valid for this tool.",
            DenyReason::GrantsInvalid => {
                "Denied: the grant files have an error; the owner has been told."
            }
            DenyReason::AuditUnavailable => {
                "Denied: the audit log cannot be written; the owner has been told."
            }
            DenyReason::StateUnreadable => {
                "Denied: this session's broker state is damaged; the owner has been told."
            }
            DenyReason::ProtectedPath => {
                "Denied: this path belongs to boxmaker itself; no tool may read or write it."
            }
            DenyReason::UnsafeAddress => {
                "Denied: the address is loopback, private or link-local, and no grant names it."
            }
            DenyReason::UntrustedInput => {
                "Denied: this session has received untrusted content, and the grant forbids this call after that."
            }
            DenyReason::ReadBeforeWrite => {
                "Denied: this file exists and changed since this session last read it (or was never read); read it with read_file first, then write."
            }
            DenyReason::CatastrophicCommand => {
                "Denied: this command could destroy the machine or the owner's files (a recursive delete of a root, home or granted folder, a write to a disk, a fork bomb or a shutdown); no grant can allow it."
            }
            DenyReason::BackgroundCommand => {
                "Denied: `&` would leave a command running after this call ends; start it with bash_bg instead."
            }
            DenyReason::TrustedPlace => {
                "Denied: this path is configuration that programs outside the box read or run (git, the shell, ssh, an agent's or editor's settings); only a grant that names it may change it."
            }
        }
    }
}

/// What the broker answers to a [`ToolRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolResponse {
    /// The tool ran; `content` is what the model sees.
    Result {
        /// The rendered result text.
        content: String,
        /// The confidentiality label of the content.
        class: Class,
        /// Whether the content came from outside the owner's control.
        untrusted: bool,
        /// Whether the content was cut to fit a cap.
        truncated: bool,
    },
    /// The tool could not run or failed; the message says why.
    Failed {
        /// What went wrong, for the model.
        message: String,
    },
    /// The broker refused the call.
    Denied {
        /// Why.
        reason: DenyReason,
    },
    /// The call waits for the owner's answer; a final response follows on the same connection.
    PendingApproval {
        /// The approval's number, as the owner sees it.
        approval: u64,
        /// When the request lapses unanswered.
        expires: Timestamp,
        /// Whether this connection's client may answer it itself (`AgentFrame::Answer`):
        /// `brokerd.toml` names the client, and it is an approval, not a question.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        answerable: bool,
    },
}
