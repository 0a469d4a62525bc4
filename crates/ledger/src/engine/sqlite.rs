//! The SQLite engine: one connection, every statement through its statement cache.

use rusqlite::Connection;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use super::{Arg, Cell, EngineError, Row};

/// An open SQLite database.
#[derive(Debug)]
pub struct SqliteEngine {
    conn: Connection,
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Arg::Int(value) => ValueRef::Integer(*value),
            Arg::Text(text) => ValueRef::Text(text.as_bytes()),
            Arg::Null => ValueRef::Null,
        }))
    }
}

fn sqlite(error: rusqlite::Error) -> EngineError {
    EngineError::Sqlite(error.to_string())
}

impl SqliteEngine {
    /// Wraps an open connection.
    pub fn new(conn: Connection) -> SqliteEngine {
        SqliteEngine { conn }
    }

    /// The connection.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(super) fn exec(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, EngineError> {
        let changed = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(args.iter())))
            .map_err(sqlite)?;
        Ok(changed as u64)
    }

    pub(super) fn query(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, EngineError> {
        let mut statement = self.conn.prepare_cached(sql).map_err(sqlite)?;
        let width = statement.column_count();
        let mut rows = statement
            .query(rusqlite::params_from_iter(args.iter()))
            .map_err(sqlite)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(sqlite)? {
            let mut cells = Vec::with_capacity(width);
            for index in 0..width {
                cells.push(match row.get_ref(index).map_err(sqlite)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(value) => Cell::Int(value),
                    ValueRef::Text(bytes) => Cell::Text(String::from_utf8_lossy(bytes).into()),
                    ValueRef::Real(_) => Cell::Other("a real number"),
                    ValueRef::Blob(_) => Cell::Other("a blob"),
                });
            }
            out.push(Row(cells));
        }
        Ok(out)
    }

    pub(super) fn batch(&self, sql: &str) -> Result<(), EngineError> {
        self.conn.execute_batch(sql).map_err(sqlite)
    }
}
