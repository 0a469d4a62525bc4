//! The two engines behind one seam, each test against a PostgreSQL server of its own: the
//! numbered migrations on both, the SQL the two share answering alike, and a server that goes
//! away and comes back.

use ledger::engine::postgres::PgEngine;
use ledger::engine::url::PgSettings;
use ledger::engine::{Arg, Cell, Engine, EngineError, Row, SchemaError, SqliteEngine};
use ledger::migrations::MIGRATIONS;
use testkit::PgServer;

fn sqlite(dir: &tempfile::TempDir) -> Engine {
    let conn = rusqlite::Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    Engine::Sqlite(SqliteEngine::new(conn))
}

fn postgres(url: &str) -> Engine {
    Engine::Postgres(PgEngine::connect(PgSettings::url(url).config().unwrap()).unwrap())
}

/// Each table's columns, in order, with whether they may be NULL.
fn columns(engine: &Engine) -> Vec<Row> {
    let sql = match engine {
        Engine::Sqlite(_) => {
            "SELECT m.name, p.name, CASE WHEN p.\"notnull\" = 1 OR p.pk > 0 THEN 1 ELSE 0 END
             FROM sqlite_master m, pragma_table_info(m.name) p
             WHERE m.type = 'table' ORDER BY m.name, p.cid"
        }
        Engine::Postgres(_) => {
            "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT),
                    CASE WHEN is_nullable = 'NO' THEN 1 ELSE 0 END
             FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name <> 'ledger_schema'
             ORDER BY table_name, ordinal_position"
        }
    };
    engine.query(sql, &[]).unwrap()
}

#[test]
fn the_numbered_migrations_make_the_same_tables_on_both_engines() {
    let dir = testkit::temp_dir();
    let server = PgServer::start();
    let (lite, pg) = (sqlite(&dir), postgres(&server.url()));
    for engine in [&lite, &pg] {
        engine.migrate(MIGRATIONS).unwrap();
        // A second time applies nothing and changes nothing.
        engine.migrate(MIGRATIONS).unwrap();
    }
    let tables = columns(&lite);
    assert!(tables.len() > 30, "{tables:?}");
    assert_eq!(tables, columns(&pg));
    // Integers are 64 bits on both: a millisecond timestamp fits.
    for engine in [&lite, &pg] {
        engine
            .exec(
                "INSERT INTO sessions (id, token_sha256, created_ms, last_used_ms, taint, untrusted)
                 VALUES (?1, ?2, ?3, ?3, 'public', 0)",
                &[Arg::Text("s"), Arg::Text("t"), Arg::Int(1_764_547_200_000)],
            )
            .unwrap();
    }
}

#[test]
fn a_database_of_a_newer_schema_is_refused_and_an_older_one_brought_forward() {
    let server = PgServer::start();
    let pg = postgres(&server.url());
    pg.migrate(&MIGRATIONS[..3]).unwrap();
    pg.migrate(MIGRATIONS).unwrap();
    let version = pg.query("SELECT version FROM ledger_schema", &[]).unwrap();
    assert_eq!(version, vec![Row(vec![Cell::Int(MIGRATIONS.len() as i64)])]);
    // A table of migration 6 is there.
    pg.exec("SELECT count(*) FROM grant_uses", &[]).unwrap();
    let error = pg.migrate(&MIGRATIONS[..2]).unwrap_err();
    assert!(
        matches!(error, SchemaError::TooNew { found, known: 2 } if found == MIGRATIONS.len() as i64),
        "{error:?}"
    );
}

#[test]
fn brokers_starting_together_apply_each_migration_once() {
    let server = PgServer::start();
    server.create_database("team");
    let url = server.url_of("team");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || postgres(&url).migrate(MIGRATIONS))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap().unwrap();
    }
    let rows = postgres(&url)
        .query("SELECT version FROM ledger_schema", &[])
        .unwrap();
    assert_eq!(rows, vec![Row(vec![Cell::Int(MIGRATIONS.len() as i64)])]);
}

#[test]
fn the_shared_statements_answer_alike_on_both_engines() {
    let dir = testkit::temp_dir();
    let server = PgServer::start();
    let mut answers = Vec::new();
    for engine in [sqlite(&dir), postgres(&server.url())] {
        engine.migrate(MIGRATIONS).unwrap();
        let upsert = "INSERT INTO meta (key, value) VALUES (?1, ?2)
                      ON CONFLICT (key) DO UPDATE SET value = excluded.value";
        engine
            .exec(upsert, &[Arg::Text("a"), Arg::Text("1")])
            .unwrap();
        engine
            .exec(upsert, &[Arg::Text("a"), Arg::Text("2")])
            .unwrap();
        engine
            .exec(
                "INSERT INTO owner_words (session, seq, text) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
                &[Arg::Text("s"), Arg::Int(7), Arg::Null],
            )
            .unwrap();
        let changed = engine
            .exec(
                "INSERT INTO owner_words (session, seq, text) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
                &[Arg::Text("s"), Arg::Int(7), Arg::Text("ignored")],
            )
            .unwrap();
        engine.begin().unwrap();
        engine
            .exec(upsert, &[Arg::Text("rolled"), Arg::Text("back")])
            .unwrap();
        engine.rollback();
        let rows = engine
            .query(
                "SELECT key, value, (SELECT text FROM owner_words WHERE seq = CAST(?1 AS INTEGER)),
                        (SELECT count(*) FROM meta)
                 FROM meta ORDER BY key",
                &[Arg::Int(7)],
            )
            .unwrap();
        answers.push((changed, rows));
    }
    assert_eq!(
        answers[0],
        (
            0,
            vec![Row(vec![
                Cell::Text("a".into()),
                Cell::Text("2".into()),
                Cell::Null,
                Cell::Int(1)
            ])]
        )
    );
    assert_eq!(answers[0], answers[1]);
}

#[test]
fn a_stopped_server_is_unavailable_by_name_and_the_engine_reconnects_when_it_is_back() {
    let server = PgServer::start();
    let pg = postgres(&server.url());
    pg.migrate(MIGRATIONS).unwrap();
    server.stop();
    let error = pg.query("SELECT count(*) FROM meta", &[]).unwrap_err();
    assert!(matches!(error, EngineError::Unavailable(_)), "{error:?}");
    assert!(error.to_string().contains("unavailable"), "{error}");
    // Still down: a new connection is refused within the connect timeout, as unavailable.
    let again = pg.query("SELECT count(*) FROM meta", &[]).unwrap_err();
    assert!(matches!(again, EngineError::Unavailable(_)), "{again:?}");
    server.restart();
    let rows = pg.query("SELECT count(*) FROM meta", &[]).unwrap();
    assert_eq!(rows, vec![Row(vec![Cell::Int(0)])]);
}

#[test]
fn a_connection_lost_inside_a_transaction_fails_it_whole() {
    let server = PgServer::start();
    let pg = postgres(&server.url());
    pg.migrate(MIGRATIONS).unwrap();
    pg.begin().unwrap();
    pg.exec(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)",
        &[Arg::Text("k"), Arg::Text("lost")],
    )
    .unwrap();
    server.stop();
    server.restart();
    // Neither this statement nor the commit runs on a fresh connection outside the
    // transaction: the transaction fails whole.
    let error = pg
        .exec(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
            &[Arg::Text("k2"), Arg::Text("after")],
        )
        .unwrap_err();
    assert!(matches!(error, EngineError::Unavailable(_)), "{error:?}");
    assert!(pg.commit().is_err());
    pg.rollback();
    let rows = pg.query("SELECT count(*) FROM meta", &[]).unwrap();
    assert_eq!(rows, vec![Row(vec![Cell::Int(0)])]);
}
