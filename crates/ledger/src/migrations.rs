//! The ledger's schema: numbered migrations, applied in order at open
//! (`PRAGMA user_version` is how many are applied), and the one runner that applies them, which
//! the memory store uses too.

/// The migrations, in order; `PRAGMA user_version` is the number applied (public so that a
/// test can make a ledger of an older schema).
pub const MIGRATIONS: &[&str] = &[
    // 1: sessions, calls, and the audit anchor.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE sessions (
         id TEXT PRIMARY KEY,
         token_sha256 TEXT NOT NULL,
         created_ms INTEGER NOT NULL,
         last_used_ms INTEGER NOT NULL,
         taint TEXT NOT NULL,
         untrusted INTEGER NOT NULL,
         ended_ms INTEGER
     );
     CREATE TABLE calls (
         session TEXT NOT NULL,
         call_id INTEGER NOT NULL,
         tool TEXT NOT NULL,
         arguments_sha256 TEXT NOT NULL,
         state TEXT NOT NULL,
         response TEXT,
         updated_ms INTEGER NOT NULL,
         PRIMARY KEY (session, call_id)
     );",
    // 2: approvals (pending ones survive a restart), grants approved for a session, and the
    // call whose untrusted result raised a session's integrity label.
    "CREATE TABLE approvals (
         id INTEGER PRIMARY KEY,
         session TEXT NOT NULL,
         call_id INTEGER NOT NULL,
         tool TEXT NOT NULL,
         arguments TEXT NOT NULL,
         grant_id TEXT,
         why TEXT NOT NULL,
         taint TEXT NOT NULL,
         untrusted INTEGER NOT NULL,
         requested_ms INTEGER NOT NULL,
         expires_ms INTEGER NOT NULL,
         state TEXT NOT NULL,
         resolution TEXT
     );
     CREATE INDEX approvals_by_call ON approvals (session, call_id);
     CREATE TABLE session_grants (
         session TEXT NOT NULL,
         grant_id TEXT NOT NULL,
         PRIMARY KEY (session, grant_id)
     );
     ALTER TABLE sessions ADD COLUMN untrusted_by TEXT;",
    // 3: what each session read of each file (read before write): the SHA-256 of the whole
    // file's content when the session last read, wrote or edited it.
    "CREATE TABLE file_reads (
         session TEXT NOT NULL,
         path TEXT NOT NULL,
         sha256 TEXT NOT NULL,
         PRIMARY KEY (session, path)
     );",
    // 4: the owner's words each session was given (issue 33): what a rebuilt value index
    // holds as the owner's, in the order they came.
    "CREATE TABLE owner_words (
         session TEXT NOT NULL,
         seq INTEGER NOT NULL,
         text TEXT,
         PRIMARY KEY (session, seq)
     );",
    // 5: approvals scoped to values (issue 33): a provenance ask's values (JSON, `[{argument,
    // value}]`) and its sentences for the owner (JSON, `[text]`), NULL for rows written before;
    // and the values the owner approved with a grant for the rest of a session.
    "ALTER TABLE approvals ADD COLUMN asked_values TEXT;
     ALTER TABLE approvals ADD COLUMN provenance TEXT;
     CREATE TABLE session_values (
         session TEXT NOT NULL,
         grant_id TEXT NOT NULL,
         argument TEXT NOT NULL,
         value TEXT NOT NULL,
         PRIMARY KEY (session, grant_id, argument, value)
     );",
    // 6: how many calls each grant let run in each session (`per_session`, issue 33).
    "CREATE TABLE grant_uses (
         session TEXT NOT NULL,
         grant_id TEXT NOT NULL,
         count INTEGER NOT NULL,
         PRIMARY KEY (session, grant_id)
     );",
    // 7: several brokers on one database (issue 39): one approval id space (the last id
    // claimed, never below the approvals' highest), the broker each approval waits in, and the
    // owner's answers given through another broker, for the one whose call waits to take.
    "CREATE TABLE approval_ids (last INTEGER NOT NULL);
     INSERT INTO approval_ids (last) SELECT COALESCE(MAX(id), 0) FROM approvals;
     ALTER TABLE approvals ADD COLUMN broker TEXT;
     CREATE TABLE handed_answers (
         approval INTEGER PRIMARY KEY,
         answer TEXT NOT NULL,
         text TEXT,
         through TEXT NOT NULL,
         answered_ms INTEGER NOT NULL,
         taken INTEGER NOT NULL
     );",
];

/// Why a database's schema could not be brought up to date.
#[derive(Debug)]
pub enum MigrateError {
    /// The file was written by a newer boxmaker: `found` migrations applied, `known` here.
    TooNew {
        /// Migrations the file says are applied.
        found: i64,
        /// Migrations this build knows.
        known: usize,
    },
    /// SQLite refused a statement.
    Sqlite(rusqlite::Error),
}

/// Applies to `conn`, in order and each in its own transaction, every one of `migrations` not
/// applied yet (`PRAGMA user_version` counts those applied): the one schema runner of the
/// ledger and the memory store.
pub fn migrate(conn: &rusqlite::Connection, migrations: &[&str]) -> Result<(), MigrateError> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(MigrateError::Sqlite)?;
    if version > migrations.len() as i64 {
        return Err(MigrateError::TooNew {
            found: version,
            known: migrations.len(),
        });
    }
    for (index, sql) in migrations.iter().enumerate().skip(version.max(0) as usize) {
        let next = index + 1;
        conn.execute_batch(&format!(
            "BEGIN; {sql} PRAGMA user_version = {next}; COMMIT;"
        ))
        .map_err(MigrateError::Sqlite)?;
    }
    Ok(())
}
