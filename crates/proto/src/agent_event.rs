//! What an agent loop tells the owner of its own, beside the calls the broker sees: `loopd`'s
//! code mode (seed 003's verify loop) sends its `role` and `verify_done` events over the agent
//! socket (`AgentFrame::LoopEvent`), and the broker passes them to the owner's `watch` streams as
//! `OwnerEvent::Agent`, deciding nothing on them. Every field is a fixed word or a number, so a
//! client can put no text of its own in front of the owner.

use serde::{Deserialize, Serialize};

/// Who speaks in a code-mode turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentRole {
    /// The model with the conversation and its tools, doing the work.
    Builder,
    /// The model in an isolated context (its own system prompt, the machine's facts, no
    /// tools): the only role that may mark a criterion passed.
    Verifier,
}

/// How a code-mode turn's verification ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyOutcome {
    /// Every criterion passed.
    Passed,
    /// Criteria still failed after two corrections: the loop stopped and said so.
    Stopped,
    /// The verifier's reply gave no verdict on any criterion: the loop stopped and said so.
    Unreadable,
    /// A builder turn or the verifier's request failed: the loop ended there.
    Failed,
}

/// One event of an agent loop's own, for the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentEvent {
    /// The speaking role changed.
    Role {
        /// Who speaks from now on.
        role: AgentRole,
    },
    /// The verification of the owner's criteria ended.
    VerifyDone {
        /// How.
        outcome: VerifyOutcome,
        /// Verification passes run in the turn.
        passes: u32,
        /// Corrections fed back to the builder.
        corrections: u32,
        /// The numbers of the criteria that passed.
        passed: Vec<u32>,
        /// The numbers of the criteria still open or failed.
        open: Vec<u32>,
    },
}
