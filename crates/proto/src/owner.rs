//! The owner socket's frames (`owner.sock`): what `bx` (and later the web console) sends to the
//! broker, and what comes back.
//!
//! They are separate enums from the agent socket's [`crate::AgentFrame`] and
//! [`crate::BrokerFrame`], with no `type` name in common, so an owner request cannot even be
//! decoded on the agent socket, and an agent frame cannot be decoded here.

use serde::{Deserialize, Serialize};

use crate::{AgentEvent, ApprovalId, CallId, Class, DenyReason, GrantId, SessionId, Timestamp};

/// A frame from an owner's program to the broker's owner socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum OwnerRequest {
    /// The first frame: the protocol version.
    OwnerHello {
        /// [`crate::PROTOCOL_VERSION`] of the owner's program.
        version: u32,
    },
    /// The pending approvals and questions.
    ListPending {},
    /// Lets a pending call run: this once, or (`for_session`) every call of its session that
    /// the same grant would ask about, for the rest of the session.
    Approve {
        /// The approval.
        approval: ApprovalId,
        /// Approve the asking grant for the rest of the session.
        for_session: bool,
    },
    /// Refuses a pending call (`ApprovalRefused`).
    Refuse {
        /// The approval.
        approval: ApprovalId,
    },
    /// Answers a pending `ask` question.
    Answer {
        /// The question's approval id.
        approval: ApprovalId,
        /// The owner's answer, given to the model as an `ask` result.
        text: String,
    },
    /// The broker's state: sockets, sessions, grants, walls.
    Status {},
    /// Streams every event from now on (after the pending approvals as they stand).
    Watch {},
    /// The newest memory entries, forgotten ones included (until purged).
    MemoryList {
        /// The most entries to list.
        limit: u64,
    },
    /// One memory entry, forgotten or not.
    MemoryShow {
        /// The entry's id.
        id: u64,
    },
    /// Forgets a memory entry: no session recalls it again; the owner still lists it until
    /// `memory_purge`.
    MemoryForget {
        /// The entry's id.
        id: u64,
    },
    /// Deletes every forgotten memory entry for good.
    MemoryPurge {},
    /// Every memory entry with its labels, in id order, as `memory_chunk` replies.
    MemoryExport {},
    /// The tools each downstream MCP server lists now (each server started if it is not
    /// running), and the definitions the broker has seen with the hashes asked for (a grant's
    /// pins), so that `bx grants check` can show what changed.
    Downstream {
        /// The pinned hashes whose definitions are wanted.
        hashes: Vec<String>,
    },
    /// Lines of the audit log as written (each one record's JSON), from line `from` (0 is the
    /// first), at most `limit` of them: what `bx console` pages through. The lines are sent as
    /// they are on disk, so a changed or broken line reaches the owner unchanged.
    AuditLines {
        /// The first line wanted, from 0.
        from: u64,
        /// The most lines wanted.
        limit: u64,
    },
    /// The audit log's chain checked against the ledger, as `bx audit verify` checks it.
    AuditVerify {},
}

/// A frame from the broker to an owner's program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum OwnerReply {
    /// The answer to `owner_hello`.
    OwnerWelcome {
        /// [`crate::PROTOCOL_VERSION`] of the broker.
        version: u32,
    },
    /// The answer to `list_pending`.
    Pending {
        /// Oldest first.
        pending: Vec<PendingView>,
    },
    /// A request was carried out.
    Done {
        /// What was done, for a person.
        message: String,
    },
    /// The answer to `status`.
    Status {
        /// The broker's state.
        status: StatusView,
    },
    /// The answer to `memory_list` and `memory_show`.
    MemoryEntries {
        /// The entries (newest first for a list).
        entries: Vec<MemoryEntry>,
        /// How many entries the store holds in all, forgotten ones included.
        total: u64,
    },
    /// Part of the answer to `memory_export`; the last part has `last` set.
    MemoryChunk {
        /// The next entries, in id order.
        entries: Vec<MemoryEntry>,
        /// Whether this is the last part.
        last: bool,
    },
    /// The answer to `downstream`.
    Downstream {
        /// Each server of `brokerd.toml`, in name order.
        servers: Vec<DownstreamView>,
        /// The definitions seen before, of the hashes asked for that the broker knows.
        known: Vec<DownstreamTool>,
    },
    /// The answer to `audit_lines`.
    AuditLines {
        /// The lines, without their line feeds (possibly fewer than asked: a reply stays
        /// under [`AUDIT_LINES_BYTES`]; a line longer than that comes alone).
        lines: Vec<String>,
        /// How many complete lines the log holds now.
        total: u64,
    },
    /// The answer to `audit_verify`.
    AuditVerified {
        /// Whether the chain holds.
        holds: bool,
        /// What the check says, as `bx audit verify` prints it.
        message: String,
        /// Where it breaks, when it does.
        broken: Option<AuditBreak>,
    },
    /// One event of a `watch` stream.
    Event {
        /// What happened.
        event: OwnerEvent,
    },
    /// The request was refused; the connection stays open (except after a bad frame).
    Error {
        /// What kind of error, for programs.
        code: OwnerErrorCode,
        /// What is wrong and what to do, for a person.
        message: String,
    },
}

/// The most bytes of lines one `audit_lines` reply carries.
pub const AUDIT_LINES_BYTES: usize = 4 * 1024 * 1024;

/// The first place the audit chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditBreak {
    /// The record named: the one changed, missing, out of place or unreadable.
    pub record: u64,
    /// Its line in the file, from 1.
    pub line: u64,
    /// What is wrong, as a sentence.
    pub what: String,
}

/// Why an owner request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerErrorCode {
    /// No approval has this id.
    UnknownApproval,
    /// The approval was already answered, expired or abandoned.
    NotPending,
    /// `answer` on a call approval, or `approve`/`refuse` on a question.
    WrongKind,
    /// The frame could not be read (the connection closes).
    BadFrame,
    /// The first frame was not `owner_hello`, or its version is not the broker's.
    Version,
    /// The answer could not be recorded (the audit log or the ledger failed).
    Internal,
    /// No memory entry has this id.
    UnknownEntry,
    /// The memory store cannot be opened or read.
    MemoryUnavailable,
    /// `owner.sock` already holds as many connections as `brokerd.toml` allows; this one is
    /// closed.
    TooManyConnections,
    /// The connection stayed idle between requests past `brokerd.toml`'s
    /// `connection_idle_ms`; it is closed (connect again).
    Idle,
}

/// One memory entry as the owner sees it, and as `bx memory export` writes it (one JSON line
/// each): its text and tags, when and by which session it was written, and that session's
/// labels at the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryEntry {
    /// Its id, from 1.
    pub id: u64,
    /// What was remembered (model-controlled: escape before printing).
    pub text: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// When it was written.
    pub at: Timestamp,
    /// The session that wrote it (`owner` for none).
    pub session: SessionId,
    /// The writing session's taint when it wrote the entry: the class a recall of it carries.
    pub class: Class,
    /// Whether the writing session had received untrusted content.
    pub untrusted: bool,
    /// When it was forgotten, if it was (kept for the owner until purged).
    pub forgotten: Option<Timestamp>,
}

/// Whether a pending item is a call waiting for approval or a question from `ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// A call a grant asks about.
    Approval,
    /// An `ask` question.
    Question,
}

/// Why the broker asks the owner about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskWhy {
    /// The grant says `approval = "ask"`.
    GrantAsks,
    /// The session has received untrusted content and the grant says `on_untrusted = "ask"`:
    /// approving for the session turns the integrity check off for that grant.
    AfterUntrusted,
    /// The model asked a question (`ask`).
    Question,
    /// The grant says `on_untrusted = "provenance"` and a value of the call came only from
    /// untrusted results: approving for the session covers that grant with those values only.
    Provenance,
    /// A value is outside a grant's rule on its argument (`otherwise = "ask"`), or the grant's
    /// `per_session` count is reached: approving for the session covers that grant with those
    /// values only.
    ArgumentRule,
}

impl AskWhy {
    /// Whether approving an ask for the rest of its session covers the asking grant with the
    /// ask's `values` only (a provenance ask that names values), rather than the whole grant
    /// (every other ask, and a provenance ask that names none: the session's values untracked).
    pub fn scoped_to_values(self, values: &[AskedValue]) -> bool {
        matches!(self, AskWhy::Provenance | AskWhy::ArgumentRule) && !values.is_empty()
    }
}

/// One value a provenance ask names: the argument it is in and the value as the call gave it
/// (a word of a script, an address in a body, a whole body copied from a result). Approving
/// the ask for the session covers its grant with its values only.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskedValue {
    /// The argument's name.
    pub argument: String,
    /// The value.
    pub value: String,
}

/// The most bytes of a value that [`AskedValue`]'s display shows.
const VALUE_SHOWN: usize = 120;

impl std::fmt::Display for AskedValue {
    /// `recipient x@y.example`: the value cut at 120 bytes (`…` then), control characters
    /// escaped (model-controlled).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cut = crate::text::cut_at_boundary(&self.value, VALUE_SHOWN);
        let ellipsis = if cut.len() < self.value.len() {
            "…"
        } else {
            ""
        };
        write!(
            f,
            "{} {}{ellipsis}",
            crate::text::escape_terminal(&self.argument),
            crate::text::escape_terminal(cut)
        )
    }
}

/// A pending approval or question, as the owner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingView {
    /// Its id, for `approve`, `refuse` and `answer`.
    pub approval: ApprovalId,
    /// Approval or question.
    pub kind: PendingKind,
    /// The session.
    pub session: SessionId,
    /// The session that opened it with `delegate`, when it is a child session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<SessionId>,
    /// The call within the session.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// The arguments as the model wrote them (model-controlled: escape before printing).
    pub arguments: String,
    /// The grant that asks.
    pub grant: Option<GrantId>,
    /// Why.
    pub why: AskWhy,
    /// The session's labels when it asked.
    pub taint: Class,
    /// Whether the session had received untrusted content.
    pub untrusted: bool,
    /// The call whose untrusted result raised the session's integrity label ("call 3
    /// (read_file)"), when there is one.
    pub untrusted_by: Option<String>,
    /// For a question: the question and its choices.
    pub question: Option<String>,
    /// For a question: the choices the model offered (may be empty).
    pub choices: Vec<String>,
    /// When provenance asks ([`AskWhy::Provenance`]): one sentence per value that came only
    /// from untrusted results, naming the argument, the value and the call it came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<String>,
    /// When provenance asks: the values that made it ask, which `bx approve ID --session`
    /// covers (this grant with these values only; see [`AskWhy::scoped_to_values`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<AskedValue>,
    /// When it was asked.
    pub requested: Timestamp,
    /// When it lapses unanswered.
    pub expires: Timestamp,
}

/// How a pending approval ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Resolution {
    /// Approved for this call.
    ApprovedOnce,
    /// Approved for the rest of the session (for the grant that asked).
    ApprovedForSession,
    /// Refused.
    Refused,
    /// A question answered.
    Answered {
        /// The owner's answer.
        text: String,
    },
    /// Nobody answered in time.
    Expired,
    /// Its client left and did not come back within the grace period, or its session
    /// ended: never run.
    Abandoned {
        /// Why.
        why: String,
    },
}

/// Something the owner may want to see as it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum OwnerEvent {
    /// A call arrived.
    Call {
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The arguments as the model wrote them (model-controlled).
        arguments: String,
    },
    /// A call was answered.
    Answered {
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// `result`, `failed` or `denied`.
        outcome: String,
        /// The reason of a denial.
        reason: Option<DenyReason>,
        /// The grant that decided it.
        grant: Option<GrantId>,
        /// Why, for the owner (may hold model-controlled text); for a result, the walls it ran
        /// in (`sandbox: …`).
        detail: String,
    },
    /// A call waits for the owner.
    Pending {
        /// The approval or question.
        pending: PendingView,
    },
    /// A pending approval ended.
    Resolved {
        /// The approval.
        approval: ApprovalId,
        /// How.
        resolution: Resolution,
    },
    /// A session was opened.
    SessionOpened {
        /// The session.
        session: SessionId,
    },
    /// A client resumed a session.
    Resumed {
        /// The session.
        session: SessionId,
    },
    /// The grants were reloaded without problems.
    GrantsLoaded {
        /// How many grants are in force.
        grants: usize,
    },
    /// The grants have problems: every call is refused until they are fixed.
    GrantProblems {
        /// Each problem with its file and line.
        problems: Vec<String>,
    },
    /// An agent loop's own event (`loopd`'s code mode), as its client sent it.
    Agent {
        /// The session.
        session: SessionId,
        /// The event.
        event: AgentEvent,
    },
    /// The stream fell behind and lost this many events.
    Lagged {
        /// How many.
        missed: u64,
    },
}

/// A downstream MCP server as `bx grants check` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamView {
    /// Its name.
    pub name: String,
    /// Its tools as it lists them now.
    pub tools: Vec<DownstreamTool>,
    /// Why it could not list them, if it could not.
    pub error: Option<String>,
}

/// One definition of a downstream tool: text from outside, to show escaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamTool {
    /// `server.tool`.
    pub name: String,
    /// The SHA-256 a grant pins (`policy::downstream::definition_hash`).
    pub hash: String,
    /// Its name, description and input schema, as indented JSON with sorted keys.
    pub definition: String,
}

/// The broker's state as `bx status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusView {
    /// The broker's pid.
    pub pid: u32,
    /// Its version and build.
    pub version: String,
    /// The agent socket.
    pub agent_socket: String,
    /// The owner socket.
    pub owner_socket: String,
    /// Sessions not ended.
    pub sessions: u64,
    /// Calls waiting for the owner.
    pub pending: u64,
    /// How many grants are in force (0 when they have problems).
    pub grants: usize,
    /// The grant problems, each with file and line (empty when they loaded).
    pub grant_problems: Vec<String>,
    /// The walls around a tool run, as this broker applies them.
    pub walls: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentFrame, ToolRequest};

    #[test]
    fn no_owner_request_decodes_as_an_agent_frame_and_no_agent_frame_as_an_owner_request() {
        let owner = [
            OwnerRequest::OwnerHello { version: 1 },
            OwnerRequest::ListPending {},
            OwnerRequest::Approve {
                approval: ApprovalId(1),
                for_session: true,
            },
            OwnerRequest::Refuse {
                approval: ApprovalId(1),
            },
            OwnerRequest::Answer {
                approval: ApprovalId(1),
                text: "yes".into(),
            },
            OwnerRequest::Status {},
            OwnerRequest::Watch {},
            OwnerRequest::MemoryList { limit: 5 },
            OwnerRequest::MemoryShow { id: 1 },
            OwnerRequest::MemoryForget { id: 1 },
            OwnerRequest::MemoryPurge {},
            OwnerRequest::MemoryExport {},
            OwnerRequest::Downstream {
                hashes: vec!["ab".into()],
            },
            OwnerRequest::AuditLines { from: 0, limit: 9 },
            OwnerRequest::AuditVerify {},
        ];
        for request in &owner {
            let json = serde_json::to_string(request).unwrap();
            assert!(serde_json::from_str::<AgentFrame>(&json).is_err(), "{json}");
            assert_eq!(
                &serde_json::from_str::<OwnerRequest>(&json).unwrap(),
                request
            );
        }
        let agent = [
            AgentFrame::Hello {
                version: 1,
                client: None,
                resume: None,
            },
            AgentFrame::ListTools {},
            AgentFrame::Call {
                request: ToolRequest {
                    session: "s".into(),
                    call_id: 1,
                    tool: "read_file".into(),
                    arguments: "{}".into(),
                },
            },
            AgentFrame::Close {},
            AgentFrame::Withdraw {},
            AgentFrame::OwnerWords {
                text: "run the tests".into(),
            },
            AgentFrame::Report {
                text: "done".into(),
            },
        ];
        for frame in &agent {
            let json = serde_json::to_string(frame).unwrap();
            assert!(
                serde_json::from_str::<OwnerRequest>(&json).is_err(),
                "{json}"
            );
        }
    }
}
