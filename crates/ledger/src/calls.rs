//! Each call's state and answer: what a call id sent again is answered from, and what the
//! broker finds interrupted at start.

use rusqlite::{OptionalExtension, params};

use proto::{CallId, SessionId, Timestamp, ToolResponse};

use crate::store::{CallRow, CallState, Ledger, LedgerError, damaged};

impl Ledger {
    /// A call, when the ledger has it.
    pub fn call(
        &self,
        session: &SessionId,
        call_id: CallId,
    ) -> Result<Option<CallRow>, LedgerError> {
        let raw = self
            .query_one(
                "SELECT tool, arguments_sha256, state, response, updated_ms FROM calls
                 WHERE session = ?1 AND call_id = ?2",
                params![session.as_str(), call_id.0 as i64],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, i64>(4)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        let Some((tool, arguments_sha256, state, response, updated)) = raw else {
            return Ok(None);
        };
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
        self.exec(
            "INSERT OR REPLACE INTO calls
                 (session, call_id, tool, arguments_sha256, state, response, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                row.session.as_str(),
                row.call_id.0 as i64,
                row.tool,
                row.arguments_sha256,
                row.state.as_str(),
                response,
                row.updated.as_millis(),
            ],
        )
        .map(|_| ())
        .map_err(|e| self.sqlite(e))
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
        self.exec(
            "UPDATE calls SET response = ?3 WHERE session = ?1 AND call_id = ?2",
            params![session.as_str(), call_id.0 as i64, text],
        )
        .map(|_| ())
        .map_err(|e| self.sqlite(e))
    }

    /// The calls in a given state (at start: `Running` ones were interrupted).
    pub fn calls_in(&self, state: CallState) -> Result<Vec<(SessionId, CallId)>, LedgerError> {
        let mut statement = self
            .conn()
            .prepare("SELECT session, call_id FROM calls WHERE state = ?1")
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map([state.as_str()], |row| {
                Ok((SessionId(row.get(0)?), CallId(row.get::<_, i64>(1)? as u64)))
            })
            .map_err(|e| self.sqlite(e))?;
        rows.map(|r| r.map_err(|e| self.sqlite(e))).collect()
    }

    /// Every answered call of `session` with its tool and answer, in the order the calls
    /// were decided (their ids as unsigned numbers).
    pub fn answers(
        &self,
        session: &SessionId,
    ) -> Result<Vec<(CallId, String, ToolResponse)>, LedgerError> {
        let mut statement = self
            .conn()
            .prepare_cached(
                "SELECT call_id, tool, response FROM calls
                 WHERE session = ?1 AND response IS NOT NULL",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = statement
            .query_map([session.as_str()], |row| {
                Ok((
                    CallId(row.get::<_, i64>(0)? as u64),
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.sqlite(e))?;
        let mut answers = Vec::new();
        for row in rows {
            let (call_id, tool, text) = row.map_err(|e| self.sqlite(e))?;
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
        let (above, below) = self
            .query_one(
                "SELECT MAX(CASE WHEN call_id < 0 THEN call_id END),
                        MAX(CASE WHEN call_id >= 0 THEN call_id END)
                 FROM calls WHERE session = ?1",
                [session.as_str()],
                |row| Ok((row.get::<_, Option<i64>>(0)?, row.get::<_, Option<i64>>(1)?)),
            )
            .map_err(|e| self.sqlite(e))?;
        Ok(above.or(below).map(|id| CallId(id as u64)))
    }
}
