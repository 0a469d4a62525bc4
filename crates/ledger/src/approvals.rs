//! Approvals in the ledger: each request for the owner's answer and how it ended, the grants a
//! session's owner approved for the rest of the session (a grant whole, or a grant with the
//! values a provenance ask named: [`AskWhy::scoped_to_values`]), and the call that made a
//! session untrusted. A pending approval survives a restart: the broker loads them at start, and a
//! client that resumes its session and sends the same call id again waits for the same one.

use proto::{
    ApprovalId, AskWhy, AskedValue, CallId, Class, GrantId, Resolution, SessionId, Timestamp,
};

use crate::audit::{Event, Field};
use crate::engine::{Arg, Row};
use crate::store::{CallRow, CallState, Ledger, LedgerError, damaged, field_digest};

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// Waiting for the owner.
    Pending,
    /// Ended (see its resolution).
    Resolved,
}

/// An approval as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRow {
    /// Its id.
    pub id: ApprovalId,
    /// The session.
    pub session: SessionId,
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// The arguments as recorded (whole when short, else a digest).
    pub arguments: Field,
    /// The grant that asks.
    pub grant: Option<GrantId>,
    /// Why it asks.
    pub why: AskWhy,
    /// The session's class when it asked.
    pub taint: Class,
    /// Whether the session was untrusted when it asked.
    pub untrusted: bool,
    /// When it was asked.
    pub requested: Timestamp,
    /// When it lapses.
    pub expires: Timestamp,
    /// Pending or resolved.
    pub state: ApprovalState,
    /// How it ended, once it has.
    pub resolution: Option<Resolution>,
    /// When provenance asked: the values that made it ask.
    pub values: Vec<AskedValue>,
    /// When provenance asked: where each value came from, one sentence each.
    pub provenance: Vec<String>,
    /// The broker the call waits in, in a database several brokers share (`None` in a
    /// broker's own SQLite file).
    pub broker: Option<String>,
}

const APPROVAL_COLUMNS: &str = "id, session, call_id, tool, arguments, grant_id, why, taint, \
     untrusted, requested_ms, expires_ms, state, resolution, asked_values, provenance, broker";

type RawApproval = (
    i64,
    String,
    i64,
    String,
    String,
    Option<String>,
    String,
    String,
    i64,
    i64,
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn raw(row: &Row) -> Result<RawApproval, LedgerError> {
    let what = match row.opt_int(0) {
        Ok(Some(id)) => format!("approval {id}"),
        _ => "an approval".to_string(),
    };
    let bad = |detail: String| damaged(&what, detail);
    Ok((
        row.int(0).map_err(bad)?,
        row.text(1).map_err(bad)?,
        row.int(2).map_err(bad)?,
        row.text(3).map_err(bad)?,
        row.text(4).map_err(bad)?,
        row.opt_text(5).map_err(bad)?,
        row.text(6).map_err(bad)?,
        row.text(7).map_err(bad)?,
        row.int(8).map_err(bad)?,
        row.int(9).map_err(bad)?,
        row.int(10).map_err(bad)?,
        row.text(11).map_err(bad)?,
        row.opt_text(12).map_err(bad)?,
        row.opt_text(13).map_err(bad)?,
        row.opt_text(14).map_err(bad)?,
        row.opt_text(15).map_err(bad)?,
    ))
}

fn parsed(raw: RawApproval) -> Result<ApprovalRow, LedgerError> {
    let (
        id,
        session,
        call_id,
        tool,
        arguments,
        grant,
        why,
        taint,
        untrusted,
        req,
        exp,
        state,
        res,
        values,
        provenance,
        broker,
    ) = raw;
    let what = format!("approval {id}");
    let bad = |detail: String| damaged(&what, detail);
    let time = |ms: i64| Timestamp::from_millis(ms).map_err(|e| bad(e.to_string()));
    Ok(ApprovalRow {
        id: ApprovalId(id as u64),
        session: SessionId(session),
        call_id: CallId(call_id as u64),
        tool,
        arguments: serde_json::from_str(&arguments).map_err(|e| bad(e.to_string()))?,
        grant: grant.map(GrantId),
        why: serde_json::from_value(serde_json::Value::String(why.clone()))
            .map_err(|_| bad(format!("why {why:?} is not a reason")))?,
        taint: Class::parse(&taint).ok_or_else(|| bad(format!("taint {taint:?}")))?,
        untrusted: untrusted != 0,
        requested: time(req)?,
        expires: time(exp)?,
        state: match state.as_str() {
            "pending" => ApprovalState::Pending,
            "resolved" => ApprovalState::Resolved,
            other => return Err(bad(format!("state {other:?}"))),
        },
        resolution: res
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        values: json_list(values.as_deref()).map_err(|e| bad(format!("asked_values: {e}")))?,
        provenance: json_list(provenance.as_deref())
            .map_err(|e| bad(format!("provenance: {e}")))?,
        broker: broker.filter(|name| !name.is_empty()),
    })
}

/// A JSON list column: NULL (a row written before the column existed) is an empty list.
fn json_list<T: serde::de::DeserializeOwned>(text: Option<&str>) -> serde_json::Result<Vec<T>> {
    text.map_or(Ok(Vec::new()), serde_json::from_str)
}

/// A list as a JSON column: NULL when empty.
fn list_json<T: serde::Serialize>(list: &[T]) -> Result<Option<String>, LedgerError> {
    if list.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(list)
        .map(Some)
        .map_err(|e| damaged("an approval's values", e.to_string()))
}

fn why_text(why: AskWhy) -> &'static str {
    match why {
        AskWhy::GrantAsks => "grant_asks",
        AskWhy::AfterUntrusted => "after_untrusted",
        AskWhy::Question => "question",
        AskWhy::Provenance => "provenance",
        AskWhy::ArgumentRule => "argument_rule",
    }
}

impl Ledger {
    /// An approval by id.
    pub fn approval(&self, id: ApprovalId) -> Result<Option<ApprovalRow>, LedgerError> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1");
        let found = self.row(&sql, &[Arg::Int(id.0 as i64)])?;
        found.as_ref().map(raw).transpose()?.map(parsed).transpose()
    }

    /// The latest approval of a call, if it ever asked.
    pub fn approval_of_call(
        &self,
        session: &SessionId,
        call_id: CallId,
    ) -> Result<Option<ApprovalRow>, LedgerError> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE session = ?1 AND call_id = ?2
             ORDER BY id DESC LIMIT 1"
        );
        let found = self.row(&sql, &[session.as_str().into(), Arg::Int(call_id.0 as i64)])?;
        found.as_ref().map(raw).transpose()?.map(parsed).transpose()
    }

    /// Every approval pending in this broker, oldest first.
    pub fn pending_approvals(&self) -> Result<Vec<ApprovalRow>, LedgerError> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals
             WHERE state = 'pending' AND COALESCE(broker, '') = ?1 ORDER BY id"
        );
        self.rows(&sql, &[self.broker_name().into()])?
            .iter()
            .map(|row| raw(row).and_then(parsed))
            .collect()
    }

    /// Every approval pending in any broker sharing the database, oldest first.
    pub fn pending_anywhere(&self) -> Result<Vec<ApprovalRow>, LedgerError> {
        let sql =
            format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = 'pending' ORDER BY id");
        self.rows(&sql, &[])?
            .iter()
            .map(|row| raw(row).and_then(parsed))
            .collect()
    }

    /// The highest approval id ever issued (0 when none was).
    pub fn last_approval_id(&self) -> Result<u64, LedgerError> {
        self.number("SELECT COALESCE(MAX(id), 0) FROM approvals", &[])
            .map(|id| id as u64)
    }

    /// Whether the owner's approvals for the rest of `session` cover an ask of `grant` for
    /// `why` naming `values`: the grant was approved whole, or the ask is scoped to values
    /// ([`AskWhy::scoped_to_values`]) and every one of them was approved with this grant. A
    /// value approved with another grant, or in another session, covers nothing here.
    pub fn approved_for_session(
        &self,
        session: &SessionId,
        grant: &GrantId,
        why: AskWhy,
        values: &[AskedValue],
    ) -> Result<bool, LedgerError> {
        let whole = self.number(
            "SELECT COUNT(*) FROM session_grants WHERE session = ?1 AND grant_id = ?2",
            &[session.as_str().into(), grant.as_str().into()],
        )?;
        if whole > 0 {
            return Ok(true);
        }
        if !why.scoped_to_values(values) {
            return Ok(false);
        }
        for value in values {
            let approved = self.number(
                "SELECT COUNT(*) FROM session_values
                 WHERE session = ?1 AND grant_id = ?2 AND argument = ?3 AND value = ?4",
                &[
                    session.as_str().into(),
                    grant.as_str().into(),
                    Arg::Text(&value.argument),
                    Arg::Text(&value.value),
                ],
            )?;
            if approved == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Records that the owner approved, for the rest of `session`, the ask of approval
    /// `approval` by `grant`: the grant with the ask's values when it was scoped to values, the
    /// grant whole otherwise (also when the ledger has no row for the approval).
    fn approve_for_session(
        &self,
        approval: ApprovalId,
        session: &SessionId,
        grant: &GrantId,
    ) -> Result<(), LedgerError> {
        if let Some(row) = self.approval(approval)?
            && row.why.scoped_to_values(&row.values)
        {
            for value in &row.values {
                self.run(
                    "INSERT INTO session_values (session, grant_id, argument, value)
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                    &[
                        session.as_str().into(),
                        grant.as_str().into(),
                        Arg::Text(&value.argument),
                        Arg::Text(&value.value),
                    ],
                )?;
            }
            return Ok(());
        }
        self.run(
            "INSERT INTO session_grants (session, grant_id) VALUES (?1, ?2)
             ON CONFLICT DO NOTHING",
            &[session.as_str().into(), grant.as_str().into()],
        )
        .map(|_| ())
    }

    /// The call whose untrusted result first made `session` untrusted ("call 3 (read_file)").
    pub fn untrusted_by(&self, session: &SessionId) -> Result<Option<String>, LedgerError> {
        self.row(
            "SELECT untrusted_by FROM sessions WHERE id = ?1",
            &[session.as_str().into()],
        )?
        .map(|row| row.opt_text(0))
        .transpose()
        .map(Option::flatten)
        .map_err(|detail| damaged(session.as_str(), detail))
    }

    /// How many sessions have not ended.
    pub fn open_sessions(&self) -> Result<u64, LedgerError> {
        self.number("SELECT COUNT(*) FROM sessions WHERE ended_ms IS NULL", &[])
            .map(|n| n as u64)
    }

    /// Records the call that made `session` untrusted, unless one is already recorded.
    pub(crate) fn set_untrusted_by(
        &self,
        session: &SessionId,
        by: &str,
    ) -> Result<(), LedgerError> {
        self.run(
            "UPDATE sessions SET untrusted_by = ?2 WHERE id = ?1 AND untrusted_by IS NULL",
            &[session.as_str().into(), Arg::Text(by)],
        )
        .map(|_| ())
    }

    /// Replays an `ApprovalRequested` or `ApprovalResolved` record.
    pub(crate) fn apply_approval(&self, event: &Event, at: Timestamp) -> Result<(), LedgerError> {
        match event {
            Event::ApprovalRequested {
                approval,
                session,
                call_id,
                tool,
                arguments,
                grant,
                why,
                labels,
                expires,
                values,
                provenance,
            } => {
                let recorded = serde_json::to_string(arguments)
                    .map_err(|e| damaged("an approval's arguments", e.to_string()))?;
                let (values, provenance) = (list_json(values)?, list_json(provenance)?);
                self.run(
                    "INSERT INTO approvals
                         (id, session, call_id, tool, arguments, grant_id, why, taint, untrusted,
                          requested_ms, expires_ms, state, resolution, asked_values, provenance,
                          broker)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'pending', NULL,
                                 ?12, ?13, ?14)
                     ON CONFLICT (id) DO UPDATE SET session = excluded.session,
                         call_id = excluded.call_id, tool = excluded.tool,
                         arguments = excluded.arguments, grant_id = excluded.grant_id,
                         why = excluded.why, taint = excluded.taint,
                         untrusted = excluded.untrusted, requested_ms = excluded.requested_ms,
                         expires_ms = excluded.expires_ms, state = excluded.state,
                         resolution = excluded.resolution, asked_values = excluded.asked_values,
                         provenance = excluded.provenance, broker = excluded.broker",
                    &[
                        Arg::Int(approval.0 as i64),
                        session.as_str().into(),
                        Arg::Int(call_id.0 as i64),
                        Arg::Text(tool),
                        Arg::Text(&recorded),
                        grant.as_ref().map(GrantId::as_str).into(),
                        why_text(*why).into(),
                        labels.taint.as_str().into(),
                        labels.untrusted.into(),
                        Arg::Int(at.as_millis()),
                        Arg::Int(expires.as_millis()),
                        values.as_ref().into(),
                        provenance.as_ref().into(),
                        Some(self.broker_name())
                            .filter(|name| !name.is_empty())
                            .into(),
                    ],
                )?;
                self.put_call(&CallRow {
                    session: session.clone(),
                    call_id: *call_id,
                    tool: tool.clone(),
                    arguments_sha256: field_digest(arguments),
                    state: CallState::Pending,
                    response: None,
                    updated: at,
                })
            }
            Event::ApprovalResolved {
                approval,
                session,
                call_id,
                grant,
                resolution,
                ..
            } => {
                let text = serde_json::to_string(resolution)
                    .map_err(|e| damaged("an approval's resolution", e.to_string()))?;
                self.run(
                    "UPDATE approvals SET state = 'resolved', resolution = ?2 WHERE id = ?1",
                    &[Arg::Int(approval.0 as i64), Arg::Text(&text)],
                )?;
                if let (Resolution::ApprovedForSession, Some(grant)) = (resolution, grant) {
                    self.approve_for_session(*approval, session, grant)?;
                }
                let state = match resolution {
                    Resolution::ApprovedOnce | Resolution::ApprovedForSession => {
                        CallState::Approved
                    }
                    Resolution::Abandoned { .. } => CallState::Abandoned,
                    // The answer itself follows in an `Answered` record.
                    Resolution::Refused | Resolution::Answered { .. } | Resolution::Expired => {
                        return Ok(());
                    }
                };
                self.run(
                    "UPDATE calls SET state = ?3, updated_ms = ?4 WHERE session = ?1 AND call_id = ?2",
                    &[
                        session.as_str().into(),
                        Arg::Int(call_id.0 as i64),
                        state.as_str().into(),
                        Arg::Int(at.as_millis()),
                    ],
                )
                .map(|_| ())
            }
            _ => Ok(()),
        }
    }
}
