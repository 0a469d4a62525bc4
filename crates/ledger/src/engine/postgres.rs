//! The PostgreSQL engine, through `postgres` (the blocking face of `tokio-postgres`). The
//! blocking client runs a runtime of its own and must never be driven from an async task, and
//! the broker calls the ledger from its tasks: so one thread owns the connection and runs every
//! statement, and the engine's methods hand it work and wait for the answer. A lost connection
//! is opened again on the next statement (outside a transaction; inside one, the transaction
//! fails whole and nothing after it runs until it is rolled back).

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::mpsc;
use std::time::Duration;

use bytes::BytesMut;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Config, NoTls, Statement};

use super::{Arg, Cell, EngineError, Row, SchemaError};

/// How long a connection attempt may take before the ledger says the server is unavailable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The advisory lock brokers take while migrating one database (any constant of our own).
const MIGRATION_LOCK: i64 = 0x626f_786d_616b_6572; // "boxmaker"

/// A statement's parameter, owned so that it can cross to the connection's thread.
#[derive(Debug, Clone)]
enum Owned {
    Int(i64),
    Text(String),
    Null,
}

impl From<&Arg<'_>> for Owned {
    fn from(arg: &Arg<'_>) -> Self {
        match arg {
            Arg::Int(value) => Owned::Int(*value),
            Arg::Text(text) => Owned::Text((*text).to_string()),
            Arg::Null => Owned::Null,
        }
    }
}

impl ToSql for Owned {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Owned::Null => Ok(IsNull::Yes),
            Owned::Text(text) => text.as_str().to_sql(ty, out),
            Owned::Int(value) => match *ty {
                Type::INT4 => i32::try_from(*value)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*value)?.to_sql(ty, out),
                Type::BOOL => (*value != 0).to_sql(ty, out),
                _ => value.to_sql(ty, out),
            },
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty)
            || <i32 as ToSql>::accepts(ty)
            || <i16 as ToSql>::accepts(ty)
            || <bool as ToSql>::accepts(ty)
            || <&str as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// The connection and what the thread keeps with it.
struct Conn {
    config: Config,
    client: Option<Client>,
    statements: HashMap<String, Statement>,
    /// In a transaction that was begun on the current connection.
    in_transaction: bool,
    /// The connection was lost inside a transaction: every statement fails until the
    /// transaction is ended.
    lost_in_transaction: bool,
}

/// Whether `error` means the server is gone (the connection lost, refused, or the server
/// shutting down) rather than a statement refused.
pub(crate) fn unavailable(error: &postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // Class 08 (connection exception), 57P01-57P03 (shutting down, crashed, starting).
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || code.starts_with("57P")
        }
        // No server answer: an I/O error, a timeout, a refused connect.
        None => true,
    }
}

fn classify(error: postgres::Error) -> EngineError {
    let text = match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match error.source() {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    };
    if unavailable(&error) {
        EngineError::Unavailable(text)
    } else {
        EngineError::Postgres(text)
    }
}

impl Conn {
    fn client(&mut self) -> Result<&mut Client, EngineError> {
        if self.lost_in_transaction {
            return Err(EngineError::Unavailable(
                "the connection was lost inside a transaction".to_string(),
            ));
        }
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
            self.statements.clear();
            if self.in_transaction {
                self.lost_in_transaction = true;
                return Err(EngineError::Unavailable(
                    "the connection was lost inside a transaction".to_string(),
                ));
            }
        }
        if self.client.is_none() {
            let client = self.config.connect(NoTls).map_err(classify)?;
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| EngineError::Unavailable("no connection".to_string()))
    }

    /// Runs `f` on the client; an error that means the server is gone drops the connection
    /// (and, inside a transaction, fails the transaction).
    fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Client, &mut HashMap<String, Statement>) -> Result<T, postgres::Error>,
    ) -> Result<T, EngineError> {
        self.client()?;
        let Some(client) = self.client.as_mut() else {
            return Err(EngineError::Unavailable("no connection".to_string()));
        };
        match f(client, &mut self.statements) {
            Ok(value) => Ok(value),
            Err(error) => {
                let error = classify(error);
                if matches!(error, EngineError::Unavailable(_)) {
                    self.client = None;
                    self.statements.clear();
                    if self.in_transaction {
                        self.lost_in_transaction = true;
                    }
                }
                Err(error)
            }
        }
    }
}

fn prepared(
    client: &mut Client,
    statements: &mut HashMap<String, Statement>,
    sql: &str,
) -> Result<Statement, postgres::Error> {
    if let Some(statement) = statements.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare(&super::Dialect::Postgres.render(sql))?;
    statements.insert(sql.to_string(), statement.clone());
    Ok(statement)
}

fn cells(row: &postgres::Row) -> Row {
    let mut cells = Vec::with_capacity(row.len());
    for (index, column) in row.columns().iter().enumerate() {
        let cell = match *column.type_() {
            Type::INT8 => row
                .try_get::<_, Option<i64>>(index)
                .map(|v| v.map(Cell::Int)),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(index)
                .map(|v| v.map(|v| Cell::Int(v.into()))),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(index)
                .map(|v| v.map(|v| Cell::Int(v.into()))),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(index)
                .map(|v| v.map(|v| Cell::Int(v.into()))),
            Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => row
                .try_get::<_, Option<String>>(index)
                .map(|v| v.map(Cell::Text)),
            _ => Ok(Some(Cell::Other(
                "a value of a type the ledger never writes",
            ))),
        };
        cells.push(match cell {
            Ok(Some(cell)) => cell,
            Ok(None) => Cell::Null,
            Err(_) => Cell::Other("a value that cannot be read"),
        });
    }
    Row(cells)
}

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// An open PostgreSQL database: a handle to the thread that owns its connection.
#[derive(Debug)]
pub struct PgEngine {
    jobs: mpsc::Sender<Job>,
}

impl PgEngine {
    /// Connects to the database `config` names (within [`CONNECT_TIMEOUT`] unless the
    /// configuration says otherwise), on a thread of its own.
    pub fn connect(mut config: Config) -> Result<PgEngine, EngineError> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let (jobs, incoming) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("ledger-postgres".into())
            .spawn(move || {
                let mut conn = Conn {
                    config,
                    client: None,
                    statements: HashMap::new(),
                    in_transaction: false,
                    lost_in_transaction: false,
                };
                while let Ok(job) = incoming.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| EngineError::Unavailable(format!("cannot start its thread: {e}")))?;
        let engine = PgEngine { jobs };
        engine.call(|conn| conn.client().map(|_| ()))?;
        Ok(engine)
    }

    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, EngineError> {
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |conn| {
            let _ = answer.send(f(conn));
        });
        let gone = || EngineError::Unavailable("the ledger's connection thread stopped".into());
        self.jobs.send(job).map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    }

    pub(super) fn exec(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, EngineError> {
        let sql = sql.to_string();
        let args: Vec<Owned> = args.iter().map(Owned::from).collect();
        self.call(move |conn| {
            conn.with(|client, statements| {
                let statement = prepared(client, statements, &sql)?;
                let params: Vec<&(dyn ToSql + Sync)> =
                    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
                client.execute(&statement, &params)
            })
        })
    }

    pub(super) fn query(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, EngineError> {
        let sql = sql.to_string();
        let args: Vec<Owned> = args.iter().map(Owned::from).collect();
        self.call(move |conn| {
            conn.with(|client, statements| {
                let statement = prepared(client, statements, &sql)?;
                let params: Vec<&(dyn ToSql + Sync)> =
                    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
                Ok(client
                    .query(&statement, &params)?
                    .iter()
                    .map(cells)
                    .collect())
            })
        })
    }

    pub(super) fn begin(&self) -> Result<(), EngineError> {
        self.call(|conn| {
            conn.with(|client, _| client.batch_execute("BEGIN"))?;
            conn.in_transaction = true;
            Ok(())
        })
    }

    pub(super) fn commit(&self) -> Result<(), EngineError> {
        self.call(|conn| {
            let committed = conn.with(|client, _| client.batch_execute("COMMIT"));
            conn.in_transaction = false;
            conn.lost_in_transaction = false;
            committed
        })
    }

    pub(super) fn rollback(&self) {
        let _ = self.call(|conn| {
            let lost = conn.lost_in_transaction;
            conn.in_transaction = false;
            conn.lost_in_transaction = false;
            if lost {
                return Ok(());
            }
            conn.with(|client, _| client.batch_execute("ROLLBACK"))
        });
    }

    pub(super) fn migrate(&self, migrations: &[&str]) -> Result<(), SchemaError> {
        let migrations: Vec<String> = migrations
            .iter()
            .map(|m| super::Dialect::Postgres.render(m))
            .collect();
        let found = self
            .call(move |conn| {
                conn.with(|client, statements| {
                    statements.clear();
                    migrate_locked(client, &migrations)
                })
            })
            .map_err(SchemaError::Engine)?;
        match found {
            Some((found, known)) => Err(SchemaError::TooNew { found, known }),
            None => Ok(()),
        }
    }
}

/// Applies `migrations` under the advisory lock; `Some((found, known))` when the database is
/// newer than this build.
fn migrate_locked(
    client: &mut Client,
    migrations: &[String],
) -> Result<Option<(i64, usize)>, postgres::Error> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    let applied = (|| {
        client.batch_execute(
            "CREATE TABLE IF NOT EXISTS ledger_schema (version BIGINT NOT NULL);
             INSERT INTO ledger_schema (version)
                 SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ledger_schema);",
        )?;
        let version: i64 = client
            .query_one("SELECT max(version) FROM ledger_schema", &[])?
            .get(0);
        if version > migrations.len() as i64 {
            return Ok(Some((version, migrations.len())));
        }
        for (index, sql) in migrations.iter().enumerate().skip(version.max(0) as usize) {
            let next = index as i64 + 1;
            client.batch_execute(&format!(
                "BEGIN; {sql}; UPDATE ledger_schema SET version = {next}; COMMIT;"
            ))?;
        }
        Ok(None)
    })();
    if applied.is_err() {
        let _ = client.batch_execute("ROLLBACK");
    }
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    let applied = applied?;
    unlocked?;
    Ok(applied)
}

/// Listens on `channel` on a connection and thread of its own: calls `wake` after each
/// (re)connection and on each notification, checks the connection every `tick` and connects
/// again (every `tick`) when it is lost. It stops when `wake` returns `false`; while the server
/// is away it keeps trying, for as long as the process lives.
pub fn listen(
    mut config: Config,
    channel: &'static str,
    tick: Duration,
    mut wake: impl FnMut() -> bool + Send + 'static,
) -> Result<(), EngineError> {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    std::thread::Builder::new()
        .name("ledger-listen".into())
        .spawn(move || {
            loop {
                if let Ok(mut client) = config.connect(NoTls)
                    && client.batch_execute(&format!("LISTEN {channel}")).is_ok()
                {
                    if !wake() {
                        return;
                    }
                    loop {
                        let heard = client.notifications().timeout_iter(tick).next();
                        match heard {
                            Ok(Some(_)) => {
                                if !wake() {
                                    return;
                                }
                            }
                            Err(_) => break,
                            Ok(None) if client.is_valid(tick).is_err() => break,
                            Ok(None) => {}
                        }
                    }
                }
                std::thread::sleep(tick);
            }
        })
        .map(|_| ())
        .map_err(|e| EngineError::Unavailable(format!("cannot start the listening thread: {e}")))
}
