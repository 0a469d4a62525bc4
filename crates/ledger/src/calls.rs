//! Each call's state and answer: what a call id sent again is answered from, and what the
//! broker finds interrupted at start.

use proto::{CallId, SessionId, Timestamp, ToolResponse};

use crate::engine::Arg;
use crate::store::{CallRow, CallState, Ledger, LedgerError, damaged};

impl Ledger {
    /// A call, when the ledger has it.
    pub fn call(
        &self,
        session: &SessionId,
        call_id: CallId,
    ) -> Result<Option<CallRow>, LedgerError> {
        let row = self.row(
            "SELECT tool, arguments_sha256, state, response, updated_ms FROM calls
             WHERE session = ?1 AND call_id = ?2",
            &[session.as_str().into(), Arg::Int(call_id.0 as i64)],
        )?;
        let Some(row) = row else { return Ok(None) };
        let what = format!("call {call_id} of session {session}");
        let bad = |detail: String| damaged(&what, detail);
        let tool = row.text(0).map_err(bad)?;
        let arguments_sha256 = row.text(1).map_err(bad)?;
        let state = row.text(2).map_err(bad)?;
        let response = row.opt_text(3).map_err(bad)?;
        let updated = row.int(4).map_err(bad)?;
        let what = format!("call {call_id} of session {session}");
        let state = CallState::parse(&state)
            .ok_or_else(|| damaged(&what, format!("state {state:?} is unknown")))?;
        let response = response
            .map(|text| serde_json::from_str::<ToolResponse>(&text))
            .transpose()
            .map_err(|e| damaged(&what, format!("the answer is not a response: {e}")))?;
        Ok(Some(CallRow {
            session: session.clone(),
            call_id,
            tool,
            arguments_sha256,
            state,
            response,
            updated: Timestamp::from_millis(updated).map_err(|e| damaged(&what, e.to_string()))?,
        }))
    }

    /// Records a call's state (and answer).
    pub fn put_call(&self, row: &CallRow) -> Result<(), LedgerError> {
        let response = row
            .response
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| damaged("a call's answer", e.to_string()))?;
        self.run(
            "INSERT INTO calls
                 (session, call_id, tool, arguments_sha256, state, response, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (session, call_id) DO UPDATE SET tool = excluded.tool,
                 arguments_sha256 = excluded.arguments_sha256, state = excluded.state,
                 response = excluded.response, updated_ms = excluded.updated_ms",
            &[
                row.session.as_str().into(),
                Arg::Int(row.call_id.0 as i64),
                Arg::Text(&row.tool),
                Arg::Text(&row.arguments_sha256),
                row.state.as_str().into(),
                response.as_ref().into(),
                Arg::Int(row.updated.as_millis()),
            ],
        )
        .map(|_| ())
    }

    /// Replaces a recorded call's answer with the whole one the client received (the audit
    /// record may keep only its digest; the ledger keeps the answer until the session ends).
    pub fn set_response(
        &self,
        session: &SessionId,
        call_id: CallId,
        response: &ToolResponse,
    ) -> Result<(), LedgerError> {
        let text = serde_json::to_string(response)
            .map_err(|e| damaged("a call's answer", e.to_string()))?;
        self.run(
            "UPDATE calls SET response = ?3 WHERE session = ?1 AND call_id = ?2",
            &[
                session.as_str().into(),
                Arg::Int(call_id.0 as i64),
                Arg::Text(&text),
            ],
        )
        .map(|_| ())
    }

    /// The calls in a given state (at start: `Running` ones were interrupted).
    pub fn calls_in(&self, state: CallState) -> Result<Vec<(SessionId, CallId)>, LedgerError> {
        self.rows(
            "SELECT session, call_id FROM calls WHERE state = ?1",
            &[state.as_str().into()],
        )?
        .iter()
        .map(|row| {
            let bad = |detail: String| damaged("a call", detail);
            Ok((
                SessionId(row.text(0).map_err(bad)?),
                CallId(row.int(1).map_err(bad)? as u64),
            ))
        })
        .collect()
    }

    /// Every answered call of `session` with its tool and answer, in the order the calls
    /// were decided (their ids as unsigned numbers).
    pub fn answers(
        &self,
        session: &SessionId,
    ) -> Result<Vec<(CallId, String, ToolResponse)>, LedgerError> {
        let rows = self.rows(
            "SELECT call_id, tool, response FROM calls
             WHERE session = ?1 AND response IS NOT NULL",
            &[session.as_str().into()],
        )?;
        let mut answers = Vec::new();
        for row in rows {
            let bad = |detail: String| damaged(&format!("a call of session {session}"), detail);
            let call_id = CallId(row.int(0).map_err(bad)? as u64);
            let tool = row.text(1).map_err(bad)?;
            let text = row.text(2).map_err(bad)?;
            let what = format!("call {call_id} of session {session}");
            let response = serde_json::from_str::<ToolResponse>(&text)
                .map_err(|e| damaged(&what, format!("the answer is not a response: {e}")))?;
            answers.push((call_id, tool, response));
        }
        answers.sort_by_key(|(id, _, _)| id.0);
        Ok(answers)
    }

    /// The highest call id `session` has used that the ledger holds (ids compared as the
    /// unsigned numbers they are), or `None` when it holds none.
    pub fn highest_call(&self, session: &SessionId) -> Result<Option<CallId>, LedgerError> {
        // Ids are stored as their bits in a signed column: those of 2^63 and above read as
        // negative numbers, still in order among themselves.
        let row = self.row(
            "SELECT MAX(CASE WHEN call_id < 0 THEN call_id END),
                    MAX(CASE WHEN call_id >= 0 THEN call_id END)
             FROM calls WHERE session = ?1",
            &[session.as_str().into()],
        )?;
        let bad = |detail: String| damaged(&format!("the calls of session {session}"), detail);
        let (above, below) = match row {
            Some(row) => (row.opt_int(0).map_err(bad)?, row.opt_int(1).map_err(bad)?),
            None => (None, None),
        };
        Ok(above.or(below).map(|id| CallId(id as u64)))
    }
}
