//! A BM25 ranking over tool names, descriptions and parameter descriptions, so that a query in
//! plain words ("read a file") finds tools whose text shares no exact substring with it.

use std::collections::HashMap;

use proto::ToolSchema;
use proto::tools::ToolName;

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;

/// Words too common to tell tools apart; a query made only of these ranks nothing. Sorted, for
/// binary search.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in",
    "is", "it", "its", "me", "my", "of", "on", "or", "please", "some", "that", "the", "this", "to",
    "use", "want", "what", "with", "you",
];

/// The ranking index of one registry: for each term, the tools that contain it and how often.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Index {
    postings: HashMap<String, Vec<(u32, u32)>>,
    lengths: Vec<f64>,
    average_length: f64,
}

impl Index {
    /// Indexes `schemas`, keeping their order as document numbers.
    pub(crate) fn new<'a>(schemas: impl Iterator<Item = &'a ToolSchema>) -> Index {
        let mut index = Index::default();
        for (doc, schema) in schemas.enumerate() {
            let mut terms = schema_terms(schema);
            index.lengths.push(terms.len() as f64);
            terms.sort_unstable();
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            let mut rest = terms.as_slice();
            while let Some(first) = rest.first() {
                let count = rest.iter().take_while(|t| *t == first).count();
                let posting = (doc, u32::try_from(count).unwrap_or(u32::MAX));
                match index.postings.get_mut(first) {
                    Some(list) => list.push(posting),
                    None => {
                        index.postings.insert(first.clone(), vec![posting]);
                    }
                }
                rest = rest.get(count..).unwrap_or_default();
            }
        }
        let total: f64 = index.lengths.iter().sum();
        index.average_length = total / index.lengths.len().max(1) as f64;
        index
    }

    /// Document numbers with a positive score for `query`, best first (ties in registry order).
    pub(crate) fn rank(&self, query: &str) -> Vec<usize> {
        let mut terms = terms(query);
        terms.sort();
        terms.dedup();
        let n = self.lengths.len() as f64;
        let mut scores = vec![0.0f64; self.lengths.len()];
        for term in &terms {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in postings {
                let length = self.lengths.get(doc as usize).copied().unwrap_or(0.0);
                let norm = K1 * (1.0 - B + B * length / self.average_length.max(1.0));
                let tf = f64::from(tf);
                if let Some(score) = scores.get_mut(doc as usize) {
                    *score += idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        let mut scored: Vec<(usize, f64)> = scores
            .into_iter()
            .enumerate()
            .filter(|s| s.1 > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().map(|(doc, _)| doc).collect()
    }
}

/// The terms of a schema: its name twice (a name is the strongest hint), its description, its
/// search words (a built-in tool's, from `proto::tools`' table: used by this ranking alone,
/// never shown to the model, never matched by `Registry::find`), and each parameter's name and description.
fn schema_terms(schema: &ToolSchema) -> Vec<String> {
    let mut out = terms(&schema.name);
    out.extend(terms(&schema.name));
    out.extend(terms(&schema.description));
    if let Some(tool) = ToolName::parse(&schema.name) {
        out.extend(
            tool.builtin()
                .search_words
                .iter()
                .flat_map(|word| terms(word)),
        );
    }
    if let Some(properties) = schema
        .parameters
        .get("properties")
        .and_then(|p| p.as_object())
    {
        for (name, property) in properties {
            out.extend(terms(name));
            if let Some(text) = property.get("description").and_then(|d| d.as_str()) {
                out.extend(terms(text));
            }
        }
    }
    out
}

/// Lower-cased words of `text`, split at anything not alphanumeric (so `read_file` is `read`
/// and `file`), without stop words, with a plural `s` removed.
fn terms(text: &str) -> Vec<String> {
    let lowered = text.to_lowercase();
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && STOP_WORDS.binary_search(word).is_err())
        .map(|word| singular(word).to_string())
        .collect()
}

fn singular(word: &str) -> &str {
    match word.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem,
        _ => word,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn names(registry: &Registry, query: &str) -> Vec<String> {
        let schemas: Vec<&ToolSchema> = registry.entries().iter().map(|e| &e.schema).collect();
        let index = Index::new(schemas.iter().copied());
        index
            .rank(query)
            .into_iter()
            .filter_map(|doc| schemas.get(doc).map(|s| s.name.clone()))
            .collect()
    }

    #[test]
    fn plain_words_find_a_tool_with_no_shared_substring() {
        let found = names(&Registry::m3a(), "read a file");
        assert_eq!(found.first().map(String::as_str), Some("read_file"));
    }

    #[test]
    fn plurals_and_case_do_not_matter() {
        let found = names(&Registry::m3a(), "Fetch URLs");
        assert_eq!(found, vec!["http_fetch".to_string()]);
    }

    #[test]
    fn stop_words_alone_rank_nothing() {
        assert!(names(&Registry::m3a(), "the a of to").is_empty());
        assert!(names(&Registry::m3a(), "").is_empty());
    }

    #[test]
    fn the_stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn a_word_a_tool_is_searched_by_finds_it_though_its_text_lacks_the_word() {
        for word in ["test", "build", "compile", "run the tests"] {
            let found = names(&Registry::m3a(), word);
            assert_eq!(found.first().map(String::as_str), Some("shell"), "{word}");
        }
        // The words rank; they are no part of what the model is shown or what find matches.
        let registry = Registry::m3a();
        assert!(registry.find("compile").is_empty());
        let (listed, _) = registry.search("compile", 5);
        assert_eq!(listed.first().map(|s| s.name.as_str()), Some("shell"));
    }

    #[test]
    fn an_empty_registry_ranks_nothing() {
        assert!(names(&Registry::default(), "file").is_empty());
    }
}
