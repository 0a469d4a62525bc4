//! The ledger's two engines behind one seam: SQLite, the embedded default, and PostgreSQL, which
//! several brokers can share ([`postgres`]). The ledger's statements are written once, in the
//! SQL both engines speak (`?1`-style parameters, `ON CONFLICT` upserts, `CAST`), with
//! parameters as [`Arg`]s and rows read back as [`Row`]s of [`Cell`]s; [`Dialect::render`] is the
//! one place a statement changes for an engine (`$1` parameters and `BIGINT` columns on
//! PostgreSQL). The migrations are numbered once ([`crate::migrations::MIGRATIONS`]) and applied
//! by [`Engine::migrate`] on either.

pub mod postgres;
mod sqlite;
pub mod url;

use std::fmt;

pub use sqlite::SqliteEngine;

/// Which SQL a statement is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite: statements as written.
    Sqlite,
    /// PostgreSQL: `?N` becomes `$N`, and the word `INTEGER` in a schema statement `BIGINT`
    /// (SQLite's integers are 64 bits; PostgreSQL's `INTEGER` is 32).
    Postgres,
}

impl Dialect {
    /// `sql` as this engine takes it. Statements hold no quoted `?` and no identifier spelled
    /// `INTEGER`, so the rewriting needs no parser.
    pub fn render(self, sql: &str) -> String {
        match self {
            Dialect::Sqlite => sql.to_string(),
            Dialect::Postgres => {
                let mut out = String::with_capacity(sql.len() + 8);
                let mut chars = sql.chars().peekable();
                while let Some(c) = chars.next() {
                    if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
                        out.push('$');
                    } else {
                        out.push(c);
                    }
                }
                out.replace("INTEGER", "BIGINT")
            }
        }
    }
}

/// One parameter of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    /// A 64-bit integer.
    Int(i64),
    /// Text.
    Text(&'a str),
    /// SQL `NULL`.
    Null,
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Arg::Int(i64::from(value))
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(value)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Self {
        Arg::Text(value)
    }
}

impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Arg::Null, Into::into)
    }
}

/// One value of a row read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// An integer (PostgreSQL's `BIGINT`, `INTEGER`, `SMALLINT` or `BOOLEAN` as 0 or 1).
    Int(i64),
    /// Text.
    Text(String),
    /// `NULL`.
    Null,
    /// A value of another kind (a SQLite blob or real, a PostgreSQL type the ledger never
    /// writes): what it is, so a damaged row says so.
    Other(&'static str),
}

/// A row read back: its cells in the statement's column order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row(pub Vec<Cell>);

impl Row {
    fn cell(&self, index: usize) -> Result<&Cell, String> {
        self.0
            .get(index)
            .ok_or_else(|| format!("column {index} is missing"))
    }

    /// Column `index` as an integer; a row holding anything else says which column.
    pub fn int(&self, index: usize) -> Result<i64, String> {
        self.opt_int(index)?
            .ok_or_else(|| format!("column {index} is NULL"))
    }

    /// Column `index` as an integer or `NULL`.
    pub fn opt_int(&self, index: usize) -> Result<Option<i64>, String> {
        match self.cell(index)? {
            Cell::Int(value) => Ok(Some(*value)),
            Cell::Null => Ok(None),
            Cell::Text(_) => Err(format!("column {index} holds text, not an integer")),
            Cell::Other(kind) => Err(format!("column {index} holds {kind}, not an integer")),
        }
    }

    /// Column `index` as text.
    pub fn text(&self, index: usize) -> Result<String, String> {
        self.opt_text(index)?
            .ok_or_else(|| format!("column {index} is NULL"))
    }

    /// Column `index` as text or `NULL`.
    pub fn opt_text(&self, index: usize) -> Result<Option<String>, String> {
        match self.cell(index)? {
            Cell::Text(value) => Ok(Some(value.clone())),
            Cell::Null => Ok(None),
            Cell::Int(_) => Err(format!("column {index} holds an integer, not text")),
            Cell::Other(kind) => Err(format!("column {index} holds {kind}, not text")),
        }
    }
}

/// Why an engine could not run a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// SQLite refused it (the text is SQLite's).
    Sqlite(String),
    /// The PostgreSQL server cannot be reached, or the connection was lost: the ledger is
    /// unavailable until it is back (the text says what happened).
    Unavailable(String),
    /// The PostgreSQL server refused the statement (the text is the server's).
    Postgres(String),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Sqlite(text) => write!(f, "SQLite: {text}"),
            EngineError::Unavailable(text) => {
                write!(f, "the PostgreSQL server is unavailable: {text}")
            }
            EngineError::Postgres(text) => write!(f, "PostgreSQL: {text}"),
        }
    }
}

impl std::error::Error for EngineError {}

/// Why the schema could not be brought up to date.
#[derive(Debug)]
pub enum SchemaError {
    /// The database was written by a newer boxmaker: `found` migrations applied, `known` here.
    TooNew {
        /// Migrations the database says are applied.
        found: i64,
        /// Migrations this build knows.
        known: usize,
    },
    /// The engine refused a statement.
    Engine(EngineError),
}

/// An open database of either engine.
#[derive(Debug)]
pub enum Engine {
    /// A SQLite file.
    Sqlite(SqliteEngine),
    /// A PostgreSQL database.
    Postgres(postgres::PgEngine),
}

impl Engine {
    /// The engine's dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Engine::Sqlite(_) => Dialect::Sqlite,
            Engine::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs one statement; returns how many rows it changed.
    pub fn exec(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, EngineError> {
        match self {
            Engine::Sqlite(e) => e.exec(sql, args),
            Engine::Postgres(e) => e.exec(sql, args),
        }
    }

    /// Runs one query; returns its rows.
    pub fn query(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, EngineError> {
        match self {
            Engine::Sqlite(e) => e.query(sql, args),
            Engine::Postgres(e) => e.query(sql, args),
        }
    }

    /// Runs one query expected to return at most one row.
    pub fn query_opt(&self, sql: &str, args: &[Arg<'_>]) -> Result<Option<Row>, EngineError> {
        Ok(self.query(sql, args)?.into_iter().next())
    }

    /// Begins a transaction that writes (SQLite's `BEGIN IMMEDIATE`).
    pub fn begin(&self) -> Result<(), EngineError> {
        match self {
            Engine::Sqlite(e) => e.batch("BEGIN IMMEDIATE"),
            Engine::Postgres(e) => e.begin(),
        }
    }

    /// Commits the transaction begun.
    pub fn commit(&self) -> Result<(), EngineError> {
        match self {
            Engine::Sqlite(e) => e.batch("COMMIT"),
            Engine::Postgres(e) => e.commit(),
        }
    }

    /// Rolls back the transaction begun (nothing to roll back is not an error).
    pub fn rollback(&self) {
        match self {
            Engine::Sqlite(e) => {
                let _ = e.batch("ROLLBACK");
            }
            Engine::Postgres(e) => e.rollback(),
        }
    }

    /// Applies every one of `migrations` not applied yet, in order, each in its own
    /// transaction; on PostgreSQL under an advisory lock, so brokers starting together apply
    /// each migration once.
    pub fn migrate(&self, migrations: &[&str]) -> Result<(), SchemaError> {
        match self {
            Engine::Sqlite(e) => {
                crate::migrations::migrate(e.conn(), migrations).map_err(|error| match error {
                    crate::migrations::MigrateError::TooNew { found, known } => {
                        SchemaError::TooNew { found, known }
                    }
                    crate::migrations::MigrateError::Sqlite(e) => {
                        SchemaError::Engine(EngineError::Sqlite(e.to_string()))
                    }
                })
            }
            Engine::Postgres(e) => e.migrate(migrations),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Dialect;

    #[test]
    fn postgres_takes_dollar_parameters_and_bigint_columns() {
        let sql = "CREATE TABLE t (a INTEGER NOT NULL, b TEXT); SELECT ?1, ?12 WHERE x = ?2";
        assert_eq!(
            Dialect::Postgres.render(sql),
            "CREATE TABLE t (a BIGINT NOT NULL, b TEXT); SELECT $1, $12 WHERE x = $2"
        );
        assert_eq!(Dialect::Sqlite.render(sql), sql);
    }
}
