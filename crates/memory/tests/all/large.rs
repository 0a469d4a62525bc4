//! 100,000 entries: the right ones come back, and a forgotten one is gone from the next recall.
//! (How fast is the benchmark's business: `cargo bench -p memory --bench recall`.)

use memory::{NewEntry, Recall, Scope};
use proto::{Class, Timestamp};

use super::{fresh, query};

const ENTRIES: u64 = 100_000;

const WORDS: [&str; 16] = [
    "apple", "river", "stone", "cloud", "lamp", "garden", "window", "copper", "violin", "harbour",
    "pepper", "lantern", "meadow", "anchor", "saddle", "thimble",
];

/// Entry `n` (from 0): its own token `nN`, four common words, `zebra` when `n % 10_000 == 7`,
/// a secret class every 1,000th entry, and the tag `tK` with `K = n % 100`.
fn text_of(n: u64) -> String {
    let mut words = vec![format!("n{n}")];
    for k in 0..4 {
        let pick = (n.wrapping_mul(2_654_435_761).wrapping_add(k * 97)) % WORDS.len() as u64;
        words.push(WORDS[pick as usize].to_string());
    }
    if n % 10_000 == 7 {
        words.push("zebra".to_string());
    }
    words.join(" ")
}

#[test]
fn a_hundred_thousand_entries_recall_the_right_ones_and_a_forgotten_one_is_gone_at_once() {
    let (_dir, _path, mut store) = fresh();
    let texts: Vec<String> = (0..ENTRIES).map(text_of).collect();
    let tags: Vec<Vec<String>> = (0..ENTRIES)
        .map(|n| vec![format!("t{}", n % 100)])
        .collect();
    let at = Timestamp::from_millis(1_700_000_000_000).unwrap();
    let ids = store
        .add_all((0..ENTRIES as usize).map(|n| NewEntry {
            text: &texts[n],
            tags: &tags[n],
            session: "bulk",
            class: if n % 1000 == 0 {
                Class::Secret
            } else {
                Class::Private
            },
            untrusted: n % 2 == 1,
            at,
        }))
        .unwrap();
    assert_eq!(ids.len() as u64, ENTRIES);
    let id_of = |n: u64| ids[n as usize];
    assert_eq!(store.list(1).unwrap().1, ENTRIES);

    // A token only one entry has finds that entry alone, with its labels.
    for n in [0, 1, 54_321, ENTRIES - 1] {
        let found = store.recall(&query(&format!("n{n}"))).unwrap();
        assert_eq!(found.hits.len(), 1, "n{n}");
        let hit = &found.hits[0].entry;
        assert_eq!(hit.id, id_of(n));
        assert_eq!(hit.text, texts[n as usize]);
        assert_eq!(hit.class == Class::Secret, n % 1000 == 0);
        assert_eq!(hit.untrusted, n % 2 == 1);
    }

    // `zebra` is in exactly ten entries: all of them, and nothing else.
    let zebras: Vec<u64> = (0..ENTRIES)
        .filter(|n| n % 10_000 == 7)
        .map(id_of)
        .collect();
    let wide = Recall {
        limit: 50,
        ..query("zebra")
    };
    let mut found: Vec<u64> = store
        .recall(&wide)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.id)
        .collect();
    found.sort();
    assert_eq!(found, zebras);

    // Tags and scopes on the whole store.
    let t7 = vec!["t7".to_string()];
    let t8 = vec!["t8".to_string()];
    let tagged = Recall { tags: &t7, ..wide };
    assert_eq!(store.recall(&tagged).unwrap().hits.len(), 10);
    let elsewhere = Recall {
        scope: Scope::Tags(&t8),
        ..wide
    };
    assert!(store.recall(&elsewhere).unwrap().hits.is_empty());
    // A common word returns the limit, every hit holding it.
    let common = store.recall(&query("lantern")).unwrap();
    assert_eq!(common.hits.len(), 10);
    assert!(common.hits.iter().all(|h| h.entry.text.contains("lantern")));

    // Forgotten: gone from the very next recall, whichever way it is asked for.
    let gone = id_of(20_007);
    assert_eq!(
        store.forget(gone, Scope::All, Timestamp::now()).unwrap(),
        memory::Forgot::Forgotten
    );
    let after: Vec<u64> = store
        .recall(&wide)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.id)
        .collect();
    assert_eq!(after.len(), 9);
    assert!(!after.contains(&gone));
    assert!(store.recall(&query("n20007")).unwrap().hits.is_empty());
    assert!(store.recall(&query("\"n20007")).unwrap().hits.is_empty());
    // The owner still sees it until the purge.
    assert!(store.show(gone).unwrap().unwrap().forgotten.is_some());
    assert_eq!(store.purge().unwrap(), 1);
    assert_eq!(store.show(gone).unwrap(), None);
    assert_eq!(store.list(1).unwrap().1, ENTRIES - 1);
}
