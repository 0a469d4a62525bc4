//! The ledger's schema: numbered migrations, applied in order at open
//! (`PRAGMA user_version` is how many are applied).

/// The migrations, in order; `PRAGMA user_version` is the number applied.
pub(crate) const MIGRATIONS: &[&str] = &[
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
];
