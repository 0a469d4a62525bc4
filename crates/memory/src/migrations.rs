//! The store's schema: numbered migrations, applied in order at open (`PRAGMA user_version` is
//! how many are applied), like the ledger's.

/// The migrations, in order; `PRAGMA user_version` is the number applied.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the entries, their tags (one row per tag, for the filters), and the FTS5 index over
    // their text (external content: the text is stored once, in `entries`). A forgotten
    // entry leaves the index at once and its row when purged.
    "CREATE TABLE entries (
         id INTEGER PRIMARY KEY,
         text TEXT NOT NULL,
         tags TEXT NOT NULL,
         at_ms INTEGER NOT NULL,
         session TEXT NOT NULL,
         class TEXT NOT NULL,
         untrusted INTEGER NOT NULL,
         forgotten_ms INTEGER
     );
     CREATE TABLE entry_tags (
         tag TEXT NOT NULL,
         entry INTEGER NOT NULL,
         PRIMARY KEY (tag, entry)
     ) WITHOUT ROWID;
     CREATE INDEX entries_forgotten ON entries (forgotten_ms) WHERE forgotten_ms IS NOT NULL;
     CREATE VIRTUAL TABLE entries_fts USING fts5(
         text,
         content = 'entries',
         content_rowid = 'id',
         tokenize = 'unicode61 remove_diacritics 2'
     );",
];
