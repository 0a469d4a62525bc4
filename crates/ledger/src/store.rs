//! The ledger: SQLite in WAL mode (so `bx` reads while the broker writes) holding each
//! session's resume-token hash and labels and each call's state and answer, with numbered
//! migrations. It is a cache of the audit log in the sense that matters: [`Ledger::apply`]
//! replays a record, so a ledger behind the log is rebuilt forward at start.

use std::path::Path;

use rusqlite::Connection;

use proto::{CallId, Class, SessionId, Timestamp, ToolResponse};

use crate::audit::Anchor;
use crate::engine::url::PgSettings;
use crate::engine::{Arg, Engine, EngineError, Row, SchemaError, SqliteEngine};

use crate::migrations::MIGRATIONS;

/// Why the ledger cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database failed: SQLite (a locked, missing or corrupt file) or PostgreSQL (a
    /// statement refused, or the server unavailable: [`LedgerError::is_unavailable`]).
    #[error("the ledger {path}: {source}")]
    Engine {
        /// The database file, or its URL (without a password).
        path: String,
        /// The cause.
        source: EngineError,
    },
    /// A PostgreSQL ledger's settings are wrong (the text says which).
    #[error("{0}")]
    Settings(String),
    /// A row cannot be read back as what it should hold.
    #[error("the ledger's row for {what} is damaged: {detail}")]
    Damaged {
        /// The session or call.
        what: String,
        /// What is wrong.
        detail: String,
    },
    /// The database file cannot be made the owner's alone (mode 0600).
    #[error("the ledger {path} cannot be made readable by its owner alone (mode 0600): {source}")]
    Private {
        /// The database file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The database was written by a newer boxmaker.
    #[error("the ledger {path} has schema version {found}; this boxmaker knows up to {known}")]
    TooNew {
        /// The database file.
        path: String,
        /// Its version.
        found: i64,
        /// The latest this build knows.
        known: usize,
    },
}

/// A session as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// The session.
    pub id: SessionId,
    /// SHA-256 (hex) of its resume token.
    pub token_sha256: String,
    /// When it was opened.
    pub created: Timestamp,
    /// When a client last used it.
    pub last_used: Timestamp,
    /// The highest class it has received.
    pub taint: Class,
    /// Whether it has received untrusted content.
    pub untrusted: bool,
    /// When it ended, if it has.
    pub ended: Option<Timestamp>,
}

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// Waiting for the owner.
    Pending,
    /// The owner said yes; about to run.
    Approved,
    /// Running now (found at start: the broker stopped during it).
    Running,
    /// Answered; the answer is kept.
    Done,
    /// Its client left while it waited; never run.
    Abandoned,
}

impl CallState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CallState::Pending => "pending",
            CallState::Approved => "approved",
            CallState::Running => "running",
            CallState::Done => "done",
            CallState::Abandoned => "abandoned",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<CallState> {
        Some(match text {
            "pending" => CallState::Pending,
            "approved" => CallState::Approved,
            "running" => CallState::Running,
            "done" => CallState::Done,
            "abandoned" => CallState::Abandoned,
            _ => return None,
        })
    }
}

/// A call as the ledger keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRow {
    /// Its session.
    pub session: SessionId,
    /// Its number in the session.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// SHA-256 of its arguments, so a reused id with other arguments is told apart.
    pub arguments_sha256: String,
    /// Where it stands.
    pub state: CallState,
    /// The answer given, once there is one.
    pub response: Option<ToolResponse>,
    /// When it last changed.
    pub updated: Timestamp,
}

/// The open ledger, on either engine.
#[derive(Debug)]
pub struct Ledger {
    db: Engine,
    path: String,
    /// What this broker's audit anchor's keys end with: nothing in its own SQLite file, `:`
    /// and the broker's name in a database several brokers share.
    anchor_suffix: String,
}

impl LedgerError {
    /// Whether the ledger's database server is unavailable (stopped, unreachable, the
    /// connection lost): the broker refuses calls saying so until it is back.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            LedgerError::Engine {
                source: EngineError::Unavailable(_),
                ..
            }
        )
    }
}

/// How many parsed statements a connection keeps: more than the ledger has.
const STATEMENT_CACHE: usize = 64;

impl Ledger {
    /// Opens (or creates) the ledger at `path`: WAL, `synchronous=NORMAL`, migrations applied;
    /// it and the files SQLite keeps beside it mode 0600 ([`crate::private`]).
    pub fn open(path: &Path) -> Result<Ledger, LedgerError> {
        let shown = path.display().to_string();
        crate::private::prepare_database(path, true).map_err(|source| LedgerError::Private {
            path: shown.clone(),
            source,
        })?;
        let conn = Connection::open(path).map_err(|source| LedgerError::Engine {
            path: shown.clone(),
            source: EngineError::Sqlite(source.to_string()),
        })?;
        // Every statement the ledger runs stays parsed (rusqlite keeps 16 by default).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
        )
        .map_err(|source| LedgerError::Engine {
            path: shown.clone(),
            source: EngineError::Sqlite(source.to_string()),
        })?;
        let ledger = Ledger::on(Engine::Sqlite(SqliteEngine::new(conn)), shown, "");
        ledger.migrate()?;
        Ok(ledger)
    }

    /// Connects to the PostgreSQL ledger `settings` names, shared with other brokers, as the
    /// broker called `broker` (whose audit anchor is its own); migrations applied.
    pub fn connect(settings: &PgSettings, broker: &str) -> Result<Ledger, LedgerError> {
        let config = settings.config().map_err(LedgerError::Settings)?;
        let shown = settings.shown();
        let db = crate::engine::postgres::PgEngine::connect(config).map_err(|source| {
            LedgerError::Engine {
                path: shown.clone(),
                source,
            }
        })?;
        let ledger = Ledger::on(Engine::Postgres(db), shown, &format!(":{broker}"));
        ledger.migrate()?;
        Ok(ledger)
    }

    fn on(db: Engine, path: String, anchor_suffix: &str) -> Ledger {
        Ledger {
            db,
            path,
            anchor_suffix: anchor_suffix.to_string(),
        }
    }

    /// Opens an existing ledger to read it (while a broker may be writing it): no migration,
    /// no change to its content (a file found wider than 0600 is narrowed first, so the shared
    /// memory index SQLite may make for this reader is 0600 too).
    pub fn open_read_only(path: &Path) -> Result<Ledger, LedgerError> {
        let shown = path.display().to_string();
        crate::private::prepare_database(path, false).map_err(|source| LedgerError::Private {
            path: shown.clone(),
            source,
        })?;
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|source| LedgerError::Engine {
                path: shown.clone(),
                source: EngineError::Sqlite(source.to_string()),
            })?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.execute_batch("PRAGMA busy_timeout = 5000;")
            .map_err(|source| LedgerError::Engine {
                path: shown.clone(),
                source: EngineError::Sqlite(source.to_string()),
            })?;
        Ok(Ledger::on(
            Engine::Sqlite(SqliteEngine::new(conn)),
            shown,
            "",
        ))
    }

    /// The engine the ledger runs on.
    pub fn engine(&self) -> &Engine {
        &self.db
    }

    /// What this broker's audit anchor's keys end with (`:` and its name when shared).
    pub(crate) fn anchor_suffix(&self) -> &str {
        &self.anchor_suffix
    }

    /// Runs a statement; how many rows it changed.
    pub(crate) fn run(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, LedgerError> {
        self.db.exec(sql, args).map_err(|e| self.failed(e))
    }

    /// Runs a query; its rows.
    pub(crate) fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, LedgerError> {
        self.db.query(sql, args).map_err(|e| self.failed(e))
    }

    /// Runs a query of at most one row.
    pub(crate) fn row(&self, sql: &str, args: &[Arg<'_>]) -> Result<Option<Row>, LedgerError> {
        self.db.query_opt(sql, args).map_err(|e| self.failed(e))
    }

    /// Runs a query whose one row's first column is a number (a count).
    pub(crate) fn number(&self, sql: &str, args: &[Arg<'_>]) -> Result<i64, LedgerError> {
        self.row(sql, args)?
            .map_or(Ok(0), |row| row.int(0))
            .map_err(|detail| damaged(sql, detail))
    }

    pub(crate) fn failed(&self, source: EngineError) -> LedgerError {
        LedgerError::Engine {
            path: self.path.clone(),
            source,
        }
    }

    /// Begins a transaction that writes.
    pub(crate) fn begin(&self) -> Result<(), LedgerError> {
        self.db.begin().map_err(|e| self.failed(e))
    }

    /// Commits it.
    pub(crate) fn commit(&self) -> Result<(), LedgerError> {
        self.db.commit().map_err(|e| self.failed(e))
    }

    /// Rolls it back.
    pub(crate) fn rollback(&self) {
        self.db.rollback();
    }

    fn migrate(&self) -> Result<(), LedgerError> {
        self.db.migrate(MIGRATIONS).map_err(|error| match error {
            SchemaError::TooNew { found, known } => LedgerError::TooNew {
                path: self.path.clone(),
                found,
                known,
            },
            SchemaError::Engine(e) => self.failed(e),
        })
    }

    /// The audit log's last record as the ledger knows it.
    pub fn anchor(&self) -> Result<Option<Anchor>, LedgerError> {
        // One statement, so one snapshot: read in two, a reader beside a running broker could
        // pair one record's number with the next one's hash (and `audit verify` would call the
        // log changed).
        let (seq_key, hash_key) = self.anchor_keys();
        let row = self.row(
            "SELECT (SELECT value FROM meta WHERE key = ?1),
                    (SELECT value FROM meta WHERE key = ?2)",
            &[Arg::Text(&seq_key), Arg::Text(&hash_key)],
        )?;
        let anchor_damaged = |detail: String| damaged("the audit anchor", detail);
        let Some(row) = row else { return Ok(None) };
        let seq = row.opt_text(0).map_err(anchor_damaged)?;
        let hash = row.opt_text(1).map_err(anchor_damaged)?;
        match (seq, hash) {
            (Some(seq), Some(hash)) => {
                let seq = seq
                    .parse()
                    .map_err(|_| anchor_damaged(format!("audit_seq {seq:?} is not a number")))?;
                Ok(Some(Anchor { seq, hash }))
            }
            _ => Ok(None),
        }
    }

    fn anchor_keys(&self) -> (String, String) {
        (
            format!("audit_seq{}", self.anchor_suffix),
            format!("audit_hash{}", self.anchor_suffix),
        )
    }

    /// Records that the audit log holds `anchor` on disk.
    pub fn set_anchor(&self, anchor: &Anchor) -> Result<(), LedgerError> {
        let (seq_key, hash_key) = self.anchor_keys();
        let seq = anchor.seq.to_string();
        self.run(
            "INSERT INTO meta (key, value) VALUES (?1, ?2), (?3, ?4)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[
                Arg::Text(&seq_key),
                Arg::Text(&seq),
                Arg::Text(&hash_key),
                Arg::Text(&anchor.hash),
            ],
        )
        .map(|_| ())
    }

    /// A session, or `None` when there is no such session; a row that cannot be read back is
    /// [`LedgerError::Damaged`] for that session only.
    pub fn session(&self, id: &SessionId) -> Result<Option<SessionRow>, LedgerError> {
        let row = self.row(
            "SELECT token_sha256, created_ms, last_used_ms, taint, untrusted, ended_ms
             FROM sessions WHERE id = ?1",
            &[Arg::Text(id.as_str())],
        )?;
        let Some(row) = row else { return Ok(None) };
        let bad = |detail: String| damaged(id.as_str(), detail);
        let token = row.text(0).map_err(bad)?;
        let created = row.int(1).map_err(bad)?;
        let last_used = row.int(2).map_err(bad)?;
        let taint = row.text(3).map_err(bad)?;
        let untrusted = row.int(4).map_err(bad)?;
        let ended = row.opt_int(5).map_err(bad)?;
        let taint = Class::parse(&taint)
            .ok_or_else(|| damaged(id.as_str(), format!("taint {taint:?} is not a class")))?;
        if token.len() != 64 {
            return Err(damaged(id.as_str(), "the token hash is not SHA-256".into()));
        }
        let time =
            |ms: i64| Timestamp::from_millis(ms).map_err(|e| damaged(id.as_str(), e.to_string()));
        Ok(Some(SessionRow {
            id: id.clone(),
            token_sha256: token,
            created: time(created)?,
            last_used: time(last_used)?,
            taint,
            untrusted: untrusted != 0,
            ended: ended.map(time).transpose()?,
        }))
    }

    /// Adds a session (or replaces a row of the same id while rebuilding).
    pub fn put_session(&self, row: &SessionRow) -> Result<(), LedgerError> {
        self.run(
            "INSERT INTO sessions
                 (id, token_sha256, created_ms, last_used_ms, taint, untrusted, ended_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (id) DO UPDATE SET token_sha256 = excluded.token_sha256,
                 created_ms = excluded.created_ms, last_used_ms = excluded.last_used_ms,
                 taint = excluded.taint, untrusted = excluded.untrusted,
                 ended_ms = excluded.ended_ms, untrusted_by = NULL",
            &[
                row.id.as_str().into(),
                Arg::Text(&row.token_sha256),
                Arg::Int(row.created.as_millis()),
                Arg::Int(row.last_used.as_millis()),
                Arg::Text(row.taint.as_str()),
                row.untrusted.into(),
                row.ended.map(|t| t.as_millis()).into(),
            ],
        )
        .map(|_| ())
    }

    /// Records that `id` was used at `at`: a resume or an answered call keeps a session alive.
    pub fn touch(&self, id: &SessionId, at: Timestamp) -> Result<(), LedgerError> {
        self.run(
            "UPDATE sessions SET last_used_ms = CASE WHEN last_used_ms > CAST(?2 AS INTEGER)
                 THEN last_used_ms ELSE CAST(?2 AS INTEGER) END WHERE id = ?1",
            &[id.as_str().into(), Arg::Int(at.as_millis())],
        )
        .map(|_| ())
    }

    /// Sets a session's labels and last use.
    pub fn set_labels(
        &self,
        id: &SessionId,
        taint: Class,
        untrusted: bool,
        now: Timestamp,
    ) -> Result<(), LedgerError> {
        self.run(
            "UPDATE sessions SET taint = ?2, untrusted = ?3, last_used_ms = ?4 WHERE id = ?1",
            &[
                id.as_str().into(),
                taint.as_str().into(),
                untrusted.into(),
                Arg::Int(now.as_millis()),
            ],
        )
        .map(|_| ())
    }

    /// Ends a session: its calls' answers are dropped; a later resume is refused.
    pub fn end_session(&self, id: &SessionId, now: Timestamp) -> Result<(), LedgerError> {
        self.run(
            "UPDATE sessions SET ended_ms = ?2 WHERE id = ?1 AND ended_ms IS NULL",
            &[id.as_str().into(), Arg::Int(now.as_millis())],
        )?;
        self.run(
            "DELETE FROM calls WHERE session = ?1",
            &[id.as_str().into()],
        )
        .map(|_| ())
    }

    /// The sessions not ended and unused since `before`.
    pub fn idle_sessions(&self, before: Timestamp) -> Result<Vec<SessionId>, LedgerError> {
        self.rows(
            "SELECT id FROM sessions WHERE ended_ms IS NULL AND last_used_ms < ?1
             AND NOT EXISTS (SELECT 1 FROM calls WHERE calls.session = sessions.id
                             AND calls.updated_ms >= ?1)",
            &[Arg::Int(before.as_millis())],
        )?
        .iter()
        .map(|row| {
            row.text(0)
                .map(SessionId)
                .map_err(|detail| damaged("a session id", detail))
        })
        .collect()
    }
}

/// The SHA-256 of a recorded field's text (or the digest it already is).
pub fn field_digest(field: &crate::audit::Field) -> String {
    match field {
        crate::audit::Field::Text { text } => crate::audit::sha256_hex(text.as_bytes()),
        crate::audit::Field::Digest { sha256, .. } => sha256.clone(),
    }
}

pub(crate) fn damaged(what: &str, detail: String) -> LedgerError {
    LedgerError::Damaged {
        what: what.to_string(),
        detail,
    }
}
