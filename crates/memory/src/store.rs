//! The store itself: one SQLite file in the memory folder, WAL, numbered migrations.

use std::io::Write;
use std::path::{Path, PathBuf};

use proto::{Class, MemoryEntry, SessionId, Timestamp};
use rusqlite::{Connection, OptionalExtension, Row, ToSql, params};

use crate::migrations::MIGRATIONS;
use crate::query::{ReadAs, terms_expression};

/// The session named on entries the owner wrote (none so far) and in owner actions.
pub const OWNER_SESSION: &str = "owner";

/// The most entries one recall returns, whatever it asks.
pub const MAX_LIMIT: usize = 100;

/// How many entries [`Store::export`] reads at a time.
const PAGE: usize = 1000;

/// Why the store cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The folder cannot be made.
    #[error("cannot make the memory folder {path}: {source}")]
    Folder {
        /// The folder.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The database file cannot be made the owner's alone (mode 0600).
    #[error(
        "the memory store {path} cannot be made readable by its owner alone (mode 0600): {source}"
    )]
    Private {
        /// The database file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// SQLite failed (a missing, locked or damaged file).
    #[error("the memory store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The file was written by a newer boxmaker.
    #[error(
        "the memory store {path} has schema version {found}; this boxmaker knows up to {known}"
    )]
    TooNew {
        /// The database file.
        path: String,
        /// Its version.
        found: i64,
        /// The latest this build knows.
        known: usize,
    },
    /// A row cannot be read back as an entry.
    #[error("the memory store's entry {id} is damaged: {detail}")]
    Damaged {
        /// The entry.
        id: i64,
        /// What is wrong.
        detail: String,
    },
    /// Writing an export failed.
    #[error("cannot write the export: {0}")]
    Export(std::io::Error),
}

/// An entry to add.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    /// The text.
    pub text: &'a str,
    /// Its tags.
    pub tags: &'a [String],
    /// The session writing it.
    pub session: &'a str,
    /// The writing session's taint now.
    pub class: Class,
    /// Whether the writing session has received untrusted content.
    pub untrusted: bool,
    /// When.
    pub at: Timestamp,
}

/// Which entries a session may reach (its grant's `tags`).
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Every entry.
    All,
    /// Reads: entries with at least one of these tags. Forgets: entries whose every tag is
    /// one of these.
    Tags(&'a [String]),
}

impl Scope<'_> {
    /// Whether an entry with `tags` may be forgotten under this scope.
    fn holds_all(&self, tags: &[String]) -> bool {
        match self {
            Scope::All => true,
            Scope::Tags(scope) => !tags.is_empty() && tags.iter().all(|t| scope.contains(t)),
        }
    }
}

/// One recall.
#[derive(Debug, Clone, Copy)]
pub struct Recall<'a> {
    /// The model's query.
    pub query: &'a str,
    /// Only entries carrying every one of these tags.
    pub tags: &'a [String],
    /// What the session may reach.
    pub scope: Scope<'a>,
    /// The most entries returned (1 to [`MAX_LIMIT`]).
    pub limit: usize,
    /// Read the query as plain terms at once (a question in prose, for `ask_memory`).
    pub terms_only: bool,
}

/// One entry found, with its snippet and BM25 score (lower is better, as FTS5 gives it).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The entry.
    pub entry: MemoryEntry,
    /// The matching part of its text, the matched words between `**`.
    pub snippet: String,
    /// `bm25()`: more negative is a better match.
    pub score: f64,
}

/// What a recall found, best first, and how the query was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    /// The entries, best first.
    pub hits: Vec<Hit>,
    /// How the query was read.
    pub read_as: ReadAs,
}

/// What [`Store::forget`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgot {
    /// The entry is forgotten.
    Forgotten,
    /// No entry of that id that this scope may forget (absent, already forgotten, or with
    /// tags outside the scope: the three look the same, so a session learns nothing of
    /// entries it cannot reach).
    NotFound,
}

/// The open store.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: String,
}

const COLUMNS: &str =
    "e.id, e.text, e.tags, e.at_ms, e.session, e.class, e.untrusted, e.forgotten_ms";

impl Store {
    /// Opens (or creates) the store at `path`, making its folder (mode 0700) if needed: WAL,
    /// `synchronous=NORMAL`, migrations applied; the file mode 0600.
    pub fn open(path: &Path) -> Result<Store, MemoryError> {
        if let Some(folder) = path.parent() {
            make_folder(folder)?;
        }
        let shown = path.display().to_string();
        // It and the files SQLite keeps beside it are mode 0600, whatever the umask.
        ledger::private::prepare_database(path, true).map_err(|source| MemoryError::Private {
            path: shown.clone(),
            source,
        })?;
        let conn = Connection::open(path).map_err(|source| MemoryError::Sqlite {
            path: shown.clone(),
            source,
        })?;
        conn.set_prepared_statement_cache_capacity(32);
        let store = Store { conn, path: shown };
        store
            .conn
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
            )
            .map_err(|e| store.sqlite(e))?;
        store.migrate()?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The connection, for benchmarks that compare against plain SQL on the same file.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn sqlite(&self, source: rusqlite::Error) -> MemoryError {
        MemoryError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn migrate(&self) -> Result<(), MemoryError> {
        ledger::migrations::migrate(&self.conn, MIGRATIONS).map_err(|error| match error {
            ledger::migrations::MigrateError::TooNew { found, known } => MemoryError::TooNew {
                path: self.path.clone(),
                found,
                known,
            },
            ledger::migrations::MigrateError::Sqlite(e) => self.sqlite(e),
        })
    }

    /// Adds an entry and returns its id.
    pub fn add(&mut self, entry: &NewEntry<'_>) -> Result<u64, MemoryError> {
        let path = self.path.clone();
        let fail = |source| MemoryError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(fail)?;
        let id = insert(&tx, entry).map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(id)
    }

    /// Adds many entries in one transaction (imports and benchmarks); their ids in order.
    pub fn add_all<'a>(
        &mut self,
        entries: impl IntoIterator<Item = NewEntry<'a>>,
    ) -> Result<Vec<u64>, MemoryError> {
        let path = self.path.clone();
        let fail = |source| MemoryError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(fail)?;
        let mut ids = Vec::new();
        for entry in entries {
            ids.push(insert(&tx, &entry).map_err(fail)?);
        }
        tx.commit().map_err(fail)?;
        Ok(ids)
    }

    /// Forgets entry `id` if `scope` may: it leaves the index at once (no recall finds it
    /// again) and stays listable by the owner until [`Store::purge`].
    pub fn forget(
        &mut self,
        id: u64,
        scope: Scope<'_>,
        at: Timestamp,
    ) -> Result<Forgot, MemoryError> {
        let Ok(key) = i64::try_from(id) else {
            return Ok(Forgot::NotFound);
        };
        let path = self.path.clone();
        let fail = |source| MemoryError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(fail)?;
        let found: Option<(String, String)> = tx
            .prepare_cached("SELECT text, tags FROM entries WHERE id = ?1 AND forgotten_ms IS NULL")
            .and_then(|mut s| {
                s.query_row([key], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(fail)?;
        let Some((text, tags)) = found else {
            return Ok(Forgot::NotFound);
        };
        let tags = parse_tags(key, &tags)?;
        if !scope.holds_all(&tags) {
            return Ok(Forgot::NotFound);
        }
        tx.prepare_cached("UPDATE entries SET forgotten_ms = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![key, at.as_millis()]))
            .map_err(fail)?;
        tx.prepare_cached(
            "INSERT INTO entries_fts (entries_fts, rowid, text) VALUES ('delete', ?1, ?2)",
        )
        .and_then(|mut s| s.execute(params![key, text]))
        .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(Forgot::Forgotten)
    }

    /// Deletes every forgotten entry for good; how many.
    pub fn purge(&mut self) -> Result<u64, MemoryError> {
        let path = self.path.clone();
        let fail = |source| MemoryError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(fail)?;
        tx.execute(
            "DELETE FROM entry_tags WHERE entry IN (SELECT id FROM entries WHERE forgotten_ms IS NOT NULL)",
            [],
        )
        .map_err(fail)?;
        let purged = tx
            .execute("DELETE FROM entries WHERE forgotten_ms IS NOT NULL", [])
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(purged as u64)
    }

    /// The entries that match `recall`, best first (BM25), never forgotten ones. FTS5 syntax
    /// it refuses is read again as plain terms; a query without a word finds nothing. Only a
    /// store that cannot be read is an error.
    pub fn recall(&self, recall: &Recall<'_>) -> Result<Recalled, MemoryError> {
        if !recall.terms_only {
            match self.matching(recall, recall.query) {
                Ok(hits) => {
                    return Ok(Recalled {
                        hits,
                        read_as: ReadAs::Fts5,
                    });
                }
                Err(e) if is_query_error(&e) => {}
                Err(e) => return Err(self.sqlite(e)),
            }
        }
        let Some(expression) = terms_expression(recall.query) else {
            return Ok(Recalled {
                hits: Vec::new(),
                read_as: ReadAs::Nothing,
            });
        };
        let hits = self
            .matching(recall, &expression)
            .map_err(|e| self.sqlite(e))?;
        Ok(Recalled {
            hits,
            read_as: ReadAs::Terms,
        })
    }

    fn matching(&self, recall: &Recall<'_>, expression: &str) -> rusqlite::Result<Vec<Hit>> {
        let mut sql = format!(
            "SELECT {COLUMNS}, snippet(entries_fts, 0, '**', '**', '…', 16), bm25(entries_fts)
             FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid
             WHERE entries_fts MATCH ?1 AND e.forgotten_ms IS NULL"
        );
        let mut values: Vec<&dyn ToSql> = vec![&expression];
        let limit = recall.limit.clamp(1, MAX_LIMIT) as i64;
        values.push(&limit);
        for tag in recall.tags {
            values.push(tag);
            sql.push_str(&format!(
                " AND e.id IN (SELECT entry FROM entry_tags WHERE tag = ?{})",
                values.len()
            ));
        }
        if let Scope::Tags(scope) = recall.scope {
            if scope.is_empty() {
                return Ok(Vec::new());
            }
            let mut marks = Vec::new();
            for tag in scope {
                values.push(tag);
                marks.push(format!("?{}", values.len()));
            }
            sql.push_str(&format!(
                " AND e.id IN (SELECT entry FROM entry_tags WHERE tag IN ({}))",
                marks.join(", ")
            ));
        }
        sql.push_str(" ORDER BY rank LIMIT ?2");
        let mut statement = self.conn.prepare_cached(&sql)?;
        let mut rows = statement.query(values.as_slice())?;
        let mut hits = Vec::new();
        while let Some(row) = rows.next()? {
            let entry = entry_of(row)?;
            hits.push(Hit {
                entry,
                snippet: row.get(8)?,
                score: row.get(9)?,
            });
        }
        Ok(hits)
    }

    /// The newest `limit` entries, forgotten ones included, and how many the store holds.
    pub fn list(&self, limit: usize) -> Result<(Vec<MemoryEntry>, u64), MemoryError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let entries = self
            .rows(
                &format!("SELECT {COLUMNS} FROM entries e ORDER BY e.id DESC LIMIT ?1"),
                params![limit],
            )
            .map_err(|e| self.sqlite(e))?;
        let total: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM entries")
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(|e| self.sqlite(e))?;
        Ok((entries, total.max(0) as u64))
    }

    /// Entry `id`, forgotten or not.
    pub fn show(&self, id: u64) -> Result<Option<MemoryEntry>, MemoryError> {
        let Ok(key) = i64::try_from(id) else {
            return Ok(None);
        };
        let mut entries = self
            .rows(
                &format!("SELECT {COLUMNS} FROM entries e WHERE e.id = ?1"),
                params![key],
            )
            .map_err(|e| self.sqlite(e))?;
        Ok(entries.pop())
    }

    /// Up to `limit` entries with ids above `after`, in id order, forgotten ones included.
    pub fn page(&self, after: u64, limit: usize) -> Result<Vec<MemoryEntry>, MemoryError> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.rows(
            &format!("SELECT {COLUMNS} FROM entries e WHERE e.id > ?1 ORDER BY e.id LIMIT ?2"),
            params![after, limit],
        )
        .map_err(|e| self.sqlite(e))
    }

    /// Writes every entry, forgotten ones included, as one JSON line each ([`MemoryEntry`]:
    /// text, tags, when, session, class, untrusted, forgotten); how many.
    pub fn export(&self, out: &mut dyn Write) -> Result<u64, MemoryError> {
        let mut after = 0;
        let mut count = 0;
        loop {
            let page = self.page(after, PAGE)?;
            let Some(last) = page.last() else {
                return Ok(count);
            };
            after = last.id;
            for entry in &page {
                let line = serde_json::to_string(entry).map_err(|e| {
                    MemoryError::Export(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
                })?;
                out.write_all(line.as_bytes())
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(MemoryError::Export)?;
                count += 1;
            }
        }
    }

    fn rows(&self, sql: &str, values: impl rusqlite::Params) -> rusqlite::Result<Vec<MemoryEntry>> {
        let mut statement = self.conn.prepare_cached(sql)?;
        let mut rows = statement.query(values)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(entry_of(row)?);
        }
        Ok(out)
    }
}

fn insert(tx: &rusqlite::Transaction<'_>, entry: &NewEntry<'_>) -> rusqlite::Result<u64> {
    let tags = serde_json::to_string(entry.tags).unwrap_or_else(|_| "[]".to_string());
    tx.prepare_cached(
        "INSERT INTO entries (text, tags, at_ms, session, class, untrusted) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        entry.text,
        tags,
        entry.at.as_millis(),
        entry.session,
        entry.class.as_str(),
        entry.untrusted
    ])?;
    let id = tx.last_insert_rowid();
    tx.prepare_cached("INSERT INTO entries_fts (rowid, text) VALUES (?1, ?2)")?
        .execute(params![id, entry.text])?;
    let mut tag_row =
        tx.prepare_cached("INSERT OR IGNORE INTO entry_tags (tag, entry) VALUES (?1, ?2)")?;
    for tag in entry.tags {
        tag_row.execute(params![tag, id])?;
    }
    Ok(id.max(0) as u64)
}

/// Whether `error` is FTS5 refusing the query's syntax (SQLite's generic `SQLITE_ERROR`: a
/// syntax error, an unknown column or special query), not the store failing.
fn is_query_error(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(e, _) if e.extended_code == rusqlite::ffi::SQLITE_ERROR)
}

/// A row whose contents do not read back: reported as a conversion failure, so that the
/// caller's error names the store.
fn damaged(id: i64, detail: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        Box::new(MemoryError::Damaged { id, detail }),
    )
}

fn parse_tags(id: i64, text: &str) -> Result<Vec<String>, MemoryError> {
    serde_json::from_str(text).map_err(|e| MemoryError::Damaged {
        id,
        detail: format!("its tags are not a list of strings: {e}"),
    })
}

fn entry_of(row: &Row<'_>) -> rusqlite::Result<MemoryEntry> {
    let id: i64 = row.get(0)?;
    let tags: String = row.get(2)?;
    let tags: Vec<String> = serde_json::from_str(&tags)
        .map_err(|e| damaged(id, format!("its tags are not a list of strings: {e}")))?;
    let at_ms: i64 = row.get(3)?;
    let at = Timestamp::from_millis(at_ms).map_err(|e| damaged(id, e.to_string()))?;
    let class: String = row.get(5)?;
    let class =
        Class::parse(&class).ok_or_else(|| damaged(id, format!("class {class:?} is unknown")))?;
    let forgotten = match row.get::<_, Option<i64>>(7)? {
        Some(ms) => Some(Timestamp::from_millis(ms).map_err(|e| damaged(id, e.to_string()))?),
        None => None,
    };
    Ok(MemoryEntry {
        id: id.max(0) as u64,
        text: row.get(1)?,
        tags,
        at,
        session: SessionId(row.get(4)?),
        class,
        untrusted: row.get(6)?,
        forgotten,
    })
}

fn make_folder(folder: &Path) -> Result<(), MemoryError> {
    use std::os::unix::fs::DirBuilderExt;
    if folder.as_os_str().is_empty() || folder.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
        .map_err(|source| MemoryError::Folder {
            path: PathBuf::from(folder).display().to_string(),
            source,
        })
}
