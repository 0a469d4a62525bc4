//! Approvals across the brokers sharing one database (issue 39): one id space
//! ([`Ledger::claim_approval_id`]), and the owner's answers given through a broker other than
//! the one whose call waits ([`Ledger::hand_answer`]). The first answer handed for an approval
//! is the one kept; the waiting broker takes it ([`Ledger::handed_answers`]), records it in its
//! own audit log and decides the call again with its own grants. On PostgreSQL each answer
//! handed is announced on [`HANDED_CHANNEL`] (`NOTIFY`), which [`listen`] wakes a broker on.

use std::time::Duration;

use proto::{ApprovalId, Timestamp};

use crate::engine::url::PgSettings;
use crate::engine::{Arg, Dialect};
use crate::store::{Ledger, LedgerError, damaged};

/// The `NOTIFY` channel an answer handed to another broker is announced on (its payload: the
/// approval's id).
pub const HANDED_CHANNEL: &str = "boxmaker_handed";

/// The owner's answer, as one broker hands it to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandedAnswer {
    /// Approve the call once.
    Once,
    /// Approve the asking grant for the rest of the session.
    ForSession,
    /// Refuse.
    Refuse,
    /// Answer a question.
    Text(String),
}

/// An answer handed through another broker, not yet taken by the one whose call waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed {
    /// The approval.
    pub approval: ApprovalId,
    /// The owner's answer.
    pub answer: HandedAnswer,
    /// The broker it was given through.
    pub through: String,
}

impl HandedAnswer {
    fn columns(&self) -> (&'static str, Option<&str>) {
        match self {
            HandedAnswer::Once => ("once", None),
            HandedAnswer::ForSession => ("session", None),
            HandedAnswer::Refuse => ("refuse", None),
            HandedAnswer::Text(text) => ("text", Some(text)),
        }
    }

    fn parse(kind: &str, text: Option<String>) -> Result<HandedAnswer, String> {
        match (kind, text) {
            ("once", _) => Ok(HandedAnswer::Once),
            ("session", _) => Ok(HandedAnswer::ForSession),
            ("refuse", _) => Ok(HandedAnswer::Refuse),
            ("text", Some(text)) => Ok(HandedAnswer::Text(text)),
            ("text", None) => Err("an answer of kind text has no text".to_string()),
            (other, _) => Err(format!(
                "answer {other:?} is not one of once, session, refuse, text"
            )),
        }
    }
}

impl Ledger {
    /// This broker's name in a database several brokers share; empty in its own SQLite file.
    pub fn broker_name(&self) -> &str {
        self.anchor_suffix().trim_start_matches(':')
    }

    /// Whether other brokers may share this ledger (it is on PostgreSQL).
    pub fn shared(&self) -> bool {
        self.engine().dialect() == Dialect::Postgres
    }

    /// A new approval id, never issued before by any broker on this database: one past the
    /// last claimed, and past the highest approval recorded (so a ledger rebuilt from a log
    /// continues after it).
    pub fn claim_approval_id(&self) -> Result<ApprovalId, LedgerError> {
        let row = self.row(
            "UPDATE approval_ids SET last = 1 + CASE
                 WHEN last >= (SELECT COALESCE(MAX(id), 0) FROM approvals) THEN last
                 ELSE (SELECT COALESCE(MAX(id), 0) FROM approvals) END
             RETURNING last",
            &[],
        )?;
        let Some(row) = row else {
            return Err(damaged("approval_ids", "the table has no row".to_string()));
        };
        let id = row
            .int(0)
            .map_err(|detail| damaged("approval_ids", detail))?;
        Ok(ApprovalId(id as u64))
    }

    /// Hands the owner's `answer` to approval `approval` to the broker whose call waits, as
    /// given through this broker at `at`: `false` when an answer was handed for it already
    /// (the first one stands). On PostgreSQL the waiting broker is woken by `NOTIFY`.
    pub fn hand_answer(
        &self,
        approval: ApprovalId,
        answer: &HandedAnswer,
        at: Timestamp,
    ) -> Result<bool, LedgerError> {
        let (kind, text) = answer.columns();
        let id = approval.0 as i64;
        let inserted = self.run(
            "INSERT INTO handed_answers (approval, answer, text, through, answered_ms, taken)
             VALUES (?1, ?2, ?3, ?4, ?5, 0) ON CONFLICT (approval) DO NOTHING",
            &[
                Arg::Int(id),
                kind.into(),
                text.into(),
                self.broker_name().into(),
                Arg::Int(at.as_millis()),
            ],
        )?;
        if self.shared() {
            self.rows(
                "SELECT pg_notify(?1, ?2)",
                &[HANDED_CHANNEL.into(), Arg::Text(&id.to_string())],
            )?;
        }
        Ok(inserted > 0)
    }

    /// The answers handed through other brokers for approvals waiting in this one and not yet
    /// taken, oldest approval first.
    pub fn handed_answers(&self) -> Result<Vec<Handed>, LedgerError> {
        let rows = self.rows(
            "SELECT h.approval, h.answer, h.text, h.through FROM handed_answers h
             JOIN approvals a ON a.id = h.approval
             WHERE h.taken = 0 AND COALESCE(a.broker, '') = ?1 ORDER BY h.approval",
            &[self.broker_name().into()],
        )?;
        rows.iter()
            .map(|row| {
                let bad = |detail: String| damaged("a handed answer", detail);
                let approval = ApprovalId(row.int(0).map_err(bad)? as u64);
                let answer =
                    HandedAnswer::parse(&row.text(1).map_err(bad)?, row.opt_text(2).map_err(bad)?)
                        .map_err(bad)?;
                Ok(Handed {
                    approval,
                    answer,
                    through: row.text(3).map_err(bad)?,
                })
            })
            .collect()
    }

    /// Marks the answer handed for `approval` as taken (carried out or found moot).
    pub fn took_answer(&self, approval: ApprovalId) -> Result<(), LedgerError> {
        self.run(
            "UPDATE handed_answers SET taken = 1 WHERE approval = ?1",
            &[Arg::Int(approval.0 as i64)],
        )
        .map(|_| ())
    }
}

/// How often the listener checks its connection and reconnects, and so the longest an answer
/// handed while it was reconnecting waits.
pub const LISTEN_TICK: Duration = Duration::from_secs(1);

/// Listens on [`HANDED_CHANNEL`] of the database `settings` names, on a thread of its own, and
/// calls `wake` on each notification and after each (re)connection (answers handed while it
/// was away are then picked up); it stops when `wake` returns `false`.
pub fn listen(
    settings: &PgSettings,
    wake: impl FnMut() -> bool + Send + 'static,
) -> Result<(), LedgerError> {
    let config = settings.config().map_err(LedgerError::Settings)?;
    crate::engine::postgres::listen(config, HANDED_CHANNEL, LISTEN_TICK, wake).map_err(|source| {
        LedgerError::Engine {
            path: settings.shown(),
            source,
        }
    })
}
