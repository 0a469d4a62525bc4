//! What one store does with a handful of entries.

use memory::{Forgot, MemoryError, ReadAs, Recall, Scope, Store};
use proto::{Class, MemoryEntry, Timestamp};

use super::{entry, fresh, query, tags};

#[test]
fn an_entry_keeps_its_text_tags_session_and_the_labels_it_was_written_with() {
    let (_dir, path, mut store) = fresh();
    let proj = tags(&["proj", "db"]);
    let mut secret = entry("the staging password is hunter2", &proj);
    secret.session = "s7";
    secret.class = Class::Secret;
    secret.untrusted = true;
    let id = store.add(&secret).unwrap();
    assert_eq!(id, 1);
    drop(store);
    // Read back from the file by a new connection.
    let store = Store::open(&path).unwrap();
    let shown = store.show(id).unwrap().unwrap();
    assert_eq!(
        shown,
        MemoryEntry {
            id: 1,
            text: "the staging password is hunter2".into(),
            tags: proj.clone(),
            at: Timestamp::from_millis(1_700_000_000_000).unwrap(),
            session: "s7".into(),
            class: Class::Secret,
            untrusted: true,
            forgotten: None,
        }
    );
    let found = store.recall(&query("password")).unwrap();
    assert_eq!(found.read_as, ReadAs::Fts5);
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.hits[0].entry, shown);
    assert!(
        found.hits[0].snippet.contains("**password**"),
        "{}",
        found.hits[0].snippet
    );
}

#[test]
fn fts5_is_compiled_into_the_bundled_sqlite() {
    let (_dir, _path, store) = fresh();
    let enabled: bool = store
        .connection()
        .query_row("SELECT sqlite_compileoption_used('ENABLE_FTS5')", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(enabled);
}

#[test]
fn fts5_syntax_from_a_model_never_errors_and_bad_syntax_falls_back_to_plain_terms() {
    let (_dir, _path, mut store) = fresh();
    let none: Vec<String> = Vec::new();
    for text in [
        "the blue door is at the end of the corridor",
        "near the harbour the boats are red",
        "prefix matching works on prefixes",
    ] {
        store.add(&entry(text, &none)).unwrap();
    }
    // Valid FTS5 syntax is used as written.
    for (valid, hits) in [
        ("\"blue door\"", 1),
        ("pref*", 1),
        ("blue OR red", 2),
        ("NEAR(blue corridor, 10)", 1),
        ("boats NOT red", 0),
        ("text: harbour", 1),
    ] {
        let found = store.recall(&query(valid)).unwrap();
        assert_eq!(found.read_as, ReadAs::Fts5, "{valid}");
        assert_eq!(found.hits.len(), hits, "{valid}");
    }
    // What FTS5 refuses is read as plain terms, joined with OR.
    for (bad, hits) in [
        ("\"blue door", 1),
        ("blue (door", 1),
        ("NEAR(blue", 2), // "NEAR" is a plain word now, and matches "near"
        ("*", 0),
        ("blue AND", 1),
        ("harbour)", 1),
        ("nosuchcolumn: blue", 1),
        ("-red", 1),
        ("\"", 0),
        ("''' \"\" (((", 0),
    ] {
        let found = store.recall(&query(bad)).unwrap();
        let expected = if hits == 0 && memory::terms(bad).is_empty() {
            ReadAs::Nothing
        } else {
            ReadAs::Terms
        };
        assert_eq!(found.read_as, expected, "{bad}");
        assert_eq!(found.hits.len(), hits, "{bad}");
    }
    // Only symbols, or nothing at all: no error, no entry.
    for empty in ["", "   ", "!@#$%^&*()", "((((", "\"\"\""] {
        let found = store.recall(&query(empty)).unwrap();
        assert!(found.hits.is_empty(), "{empty:?}");
    }
    // A question in prose, read as terms at once.
    let question = Recall {
        terms_only: true,
        ..query("Where is the blue door?")
    };
    let found = store.recall(&question).unwrap();
    assert_eq!(found.read_as, ReadAs::Terms);
    assert_eq!(
        found.hits[0].entry.text,
        "the blue door is at the end of the corridor"
    );
}

#[test]
fn recall_ranks_by_bm25_and_honours_the_limit() {
    let (_dir, _path, mut store) = fresh();
    let none: Vec<String> = Vec::new();
    for n in 0..30 {
        store
            .add(&entry(&format!("note {n} about apples and pears"), &none))
            .unwrap();
    }
    let best = store.add(&entry("apples apples apples", &none)).unwrap();
    let found = store.recall(&query("apples")).unwrap();
    assert_eq!(found.hits.len(), 10);
    assert_eq!(found.hits[0].entry.id, best);
    assert!(found.hits.windows(2).all(|w| w[0].score <= w[1].score));
    let three = Recall {
        limit: 3,
        ..query("apples")
    };
    assert_eq!(store.recall(&three).unwrap().hits.len(), 3);
}

#[test]
fn tags_filter_a_recall_and_a_scope_limits_reads_and_forgets() {
    let (_dir, _path, mut store) = fresh();
    let proj = tags(&["proj"]);
    let both = tags(&["proj", "home"]);
    let home = tags(&["home"]);
    let none: Vec<String> = Vec::new();
    let a = store.add(&entry("kettle in proj", &proj)).unwrap();
    let b = store.add(&entry("kettle in both", &both)).unwrap();
    let c = store.add(&entry("kettle at home", &home)).unwrap();
    let d = store.add(&entry("kettle untagged", &none)).unwrap();
    let ids = |store: &Store, recall: &Recall<'_>| -> Vec<u64> {
        let mut ids: Vec<u64> = store
            .recall(recall)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.entry.id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&store, &query("kettle")), [a, b, c, d]);
    // `tags`: every tag named.
    let filter = tags(&["proj", "home"]);
    assert_eq!(
        ids(
            &store,
            &Recall {
                tags: &proj,
                ..query("kettle")
            }
        ),
        [a, b]
    );
    assert_eq!(
        ids(
            &store,
            &Recall {
                tags: &filter,
                ..query("kettle")
            }
        ),
        [b]
    );
    // A scope: any of its tags.
    assert_eq!(
        ids(
            &store,
            &Recall {
                scope: Scope::Tags(&proj),
                ..query("kettle")
            }
        ),
        [a, b]
    );
    assert!(
        ids(
            &store,
            &Recall {
                scope: Scope::Tags(&[]),
                ..query("kettle")
            }
        )
        .is_empty()
    );
    // A scoped forget reaches only entries whose every tag is in scope.
    let now = Timestamp::now();
    assert_eq!(
        store.forget(b, Scope::Tags(&proj), now).unwrap(),
        Forgot::NotFound
    );
    assert_eq!(
        store.forget(d, Scope::Tags(&proj), now).unwrap(),
        Forgot::NotFound
    );
    assert_eq!(
        store.forget(a, Scope::Tags(&proj), now).unwrap(),
        Forgot::Forgotten
    );
    assert_eq!(
        store.forget(a, Scope::All, now).unwrap(),
        Forgot::NotFound,
        "already forgotten"
    );
    assert_eq!(
        store.forget(999, Scope::All, now).unwrap(),
        Forgot::NotFound
    );
    assert_eq!(
        store.forget(u64::MAX, Scope::All, now).unwrap(),
        Forgot::NotFound
    );
    assert_eq!(ids(&store, &query("kettle")), [b, c, d]);
}

#[test]
fn forgotten_entries_stay_listable_until_purged_and_export_writes_json_lines_with_labels() {
    let (_dir, _path, mut store) = fresh();
    let none: Vec<String> = Vec::new();
    let mut secret = entry("first", &none);
    secret.class = Class::Secret;
    let first = store.add(&secret).unwrap();
    let second = store.add(&entry("second \"quoted\"\nline", &none)).unwrap();
    let at = Timestamp::from_millis(1_800_000_000_000).unwrap();
    assert_eq!(
        store.forget(first, Scope::All, at).unwrap(),
        Forgot::Forgotten
    );
    let (listed, total) = store.list(10).unwrap();
    assert_eq!(total, 2);
    assert_eq!(
        listed.iter().map(|e| e.id).collect::<Vec<_>>(),
        [second, first]
    );
    assert_eq!(listed[1].forgotten, Some(at));
    assert!(store.recall(&query("first")).unwrap().hits.is_empty());

    let mut out = Vec::new();
    assert_eq!(store.export(&mut out).unwrap(), 2);
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<MemoryEntry> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].class, Class::Secret);
    assert_eq!(lines[0].forgotten, Some(at));
    assert_eq!(lines[1].text, "second \"quoted\"\nline");
    let first_line = text.lines().next().unwrap();
    assert!(
        first_line.contains("\"class\":\"secret\"") && first_line.contains("\"untrusted\":false"),
        "{first_line}"
    );

    assert_eq!(store.purge().unwrap(), 1);
    assert_eq!(store.show(first).unwrap(), None);
    assert_eq!(store.list(10).unwrap().1, 1);
    assert_eq!(store.purge().unwrap(), 0);
    // Ids are not reused after a purge.
    let third = store.add(&entry("third", &none)).unwrap();
    assert!(third > second);
}

#[test]
fn a_damaged_file_gives_an_error_that_names_it() {
    let dir = tempfile::Builder::new()
        .prefix("boxmaker-memory-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("memory.sqlite");
    std::fs::write(
        &path,
        b"this is not a database, it is some bytes ".repeat(200),
    )
    .unwrap();
    let error = Store::open(&path).unwrap_err();
    assert!(matches!(error, MemoryError::Sqlite { .. }), "{error:?}");
    let shown = error.to_string();
    assert!(
        shown.contains(&path.display().to_string()) && shown.contains("not a database"),
        "{shown}"
    );
}

#[test]
fn a_store_from_a_newer_boxmaker_is_refused() {
    let (_dir, path, store) = fresh();
    store
        .connection()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    drop(store);
    let error = Store::open(&path).unwrap_err();
    assert!(
        matches!(error, MemoryError::TooNew { found: 99, .. }),
        "{error:?}"
    );
}
