//! A BM25 ranking over tool names, descriptions and parameter descriptions, so that a query in
//! plain words ("read a file") finds tools whose text shares no exact substring with it.

use std::collections::HashMap;

use crate::llama::ToolSchema;

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;

/// Words too common to tell tools apart; a query made only of these ranks nothing.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in",
    "is", "it", "its", "me", "my", "of", "on", "or", "please", "some", "that", "the", "this", "to",
    "use", "want", "what", "with", "you",
];

/// The ranking index of one registry: each tool's terms and their counts.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Index {
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    doc_freq: HashMap<String, u32>,
    average_length: f64,
}

impl Index {
    /// Indexes `schemas`, keeping their order as document numbers.
    pub(crate) fn new<'a>(schemas: impl Iterator<Item = &'a ToolSchema>) -> Index {
        let mut index = Index::default();
        for schema in schemas {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut length = 0u32;
            for term in schema_terms(schema) {
                *counts.entry(term).or_default() += 1;
                length += 1;
            }
            for term in counts.keys() {
                *index.doc_freq.entry(term.clone()).or_default() += 1;
            }
            index.docs.push(counts);
            index.lengths.push(f64::from(length));
        }
        let total: f64 = index.lengths.iter().sum();
        index.average_length = if index.docs.is_empty() {
            0.0
        } else {
            total / index.docs.len() as f64
        };
        index
    }

    /// Document numbers with a positive score for `query`, best first (ties in registry order).
    pub(crate) fn rank(&self, query: &str) -> Vec<usize> {
        let mut terms = terms(query);
        terms.sort();
        terms.dedup();
        if terms.is_empty() || self.docs.is_empty() {
            return Vec::new();
        }
        let n = self.docs.len() as f64;
        let mut scored: Vec<(usize, f64)> = Vec::new();
        for (doc, counts) in self.docs.iter().enumerate() {
            let length = self.lengths.get(doc).copied().unwrap_or(0.0);
            let norm = K1 * (1.0 - B + B * length / self.average_length.max(1.0));
            let mut score = 0.0;
            for term in &terms {
                let Some(&tf) = counts.get(term) else {
                    continue;
                };
                let df = f64::from(self.doc_freq.get(term).copied().unwrap_or(0));
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                let tf = f64::from(tf);
                score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
            if score > 0.0 {
                scored.push((doc, score));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().map(|(doc, _)| doc).collect()
    }
}

/// The terms of a schema: its name twice (a name is the strongest hint), its description, and
/// each parameter's name and description.
fn schema_terms(schema: &ToolSchema) -> Vec<String> {
    let mut out = terms(&schema.name);
    out.extend(terms(&schema.name));
    out.extend(terms(&schema.description));
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
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .map(|word| singular(&word))
        .collect()
}

fn singular(word: &str) -> String {
    match word.strip_suffix('s') {
        Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_string(),
        _ => word.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Registry;

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
    fn an_empty_registry_ranks_nothing() {
        assert!(names(&Registry::default(), "file").is_empty());
    }
}
