//! The check of a call's values against the session's index (the rules are in the module
//! documentation of [`crate::provenance`]).

use proto::Class;

use super::index::{Entry, ValueIndex};
use super::normal::{alnum_words, iban_form, joined_words, text_form};
use super::scan::{
    Candidate, Piece, candidate, notable, pieces_after, plain, structured, with_tokens,
};
use super::script::simple_words;
use super::{Concern, Finding, Part, RUN_WORDS, Unproven, Value, ValueKind, Verdict};
use crate::shell::script_words;

/// What the index says of one value.
#[derive(Debug, Default)]
struct Judged {
    untrusted: Option<(Part, u32)>,
    secret: Option<(Part, u32)>,
    /// No form of it is held (it was never handed out, or the index overflowed first).
    absent: bool,
}

impl ValueIndex {
    /// The verdict on a call's values: which occur only in untrusted results, which are
    /// secrets, and whether the index could vouch for all (see the module documentation).
    pub fn check(&self, values: &[Value<'_>]) -> Verdict {
        let mut verdict = Verdict::default();
        for value in values {
            let mut call = CallCheck {
                index: self,
                verdict: &mut verdict,
                argument: value.name,
            };
            match value.kind {
                ValueKind::Identifier => call.identifier(value.text),
                ValueKind::FreeText => call.free_text(value.text),
                ValueKind::ShellCommand => call.shell(value.text),
            }
        }
        verdict
    }

    /// Whether `text`, read as one identifier, is owned: one of its normal forms occurs in an
    /// owned source (the owner's words, a trusted result, a grant's literal), or, for a value
    /// of several tokens, the whole run or every pair of its neighbouring tokens does.
    pub fn owns(&self, text: &str) -> bool {
        let owned = |key: u64| self.get(key).is_some_and(|e| e.owned);
        with_tokens(text, |chunks| match chunks {
            [] => false,
            [only] => {
                let found = candidate(only, text_form(only));
                found.forms.iter().any(|form| owned(self.hash_str(form)))
            }
            _ => {
                owned(self.hash_text_forms(chunks))
                    || iban_form(text).is_some_and(|iban| owned(self.hash_str(&iban)))
                    || chunks
                        .windows(2)
                        .all(|pair| owned(self.hash_text_forms(pair)))
            }
        })
    }

    /// One identifier by the keys of its forms, then its host, then its pairs of tokens
    /// (each a token as written: a pair is looked up under the text forms of both).
    fn judge(&self, forms: &[u64], host: Option<&str>, tokens: &[&str]) -> Judged {
        let mut judged = Judged::default();
        let mut found = false;
        let mut owned = false;
        let mut secret: Option<&Entry> = None;
        let mut untrusted = None;
        for entry in forms.iter().filter_map(|key| self.get(*key)) {
            found = true;
            owned |= entry.owned;
            if secret.is_none() && entry.class == Class::Secret {
                secret = Some(entry);
            }
            untrusted = untrusted.or(entry.untrusted);
        }
        if let Some(secret) = secret {
            judged.secret = secret.secret.map(|o| (Part::Whole, o));
        }
        if owned {
            return judged;
        }
        if let Some(origin) = untrusted {
            judged.untrusted = Some((Part::Whole, origin));
            return judged;
        }
        if let Some(host) = host
            && let Some(entry) = self.get(self.hash_str(host))
        {
            found = true;
            if !entry.owned
                && let Some(origin) = entry.untrusted
            {
                judged.untrusted = Some((Part::Host(host.to_owned()), origin));
                return judged;
            }
        }
        if tokens.len() >= 2 {
            let mut pairs_found = 0;
            for pair in tokens.windows(2) {
                let Some(entry) = self.get(self.hash_text_forms(pair)) else {
                    continue;
                };
                pairs_found += 1;
                if entry.class == Class::Secret && judged.secret.is_none() {
                    judged.secret = entry.secret.map(|o| (Part::Run(pair_text(pair)), o));
                }
                if !entry.owned
                    && let Some(origin) = entry.untrusted
                    && judged.untrusted.is_none()
                {
                    judged.untrusted = Some((Part::Run(pair_text(pair)), origin));
                }
            }
            found |= pairs_found == tokens.len() - 1;
        }
        judged.absent = !found;
        judged
    }

    /// [`ValueIndex::judge`] of a built candidate: its forms' keys, its host.
    fn judge_candidate(&self, candidate: &Candidate) -> Judged {
        let host = candidate.host.as_deref();
        // A candidate has at most four forms (text, email or URL, IBAN, number).
        let mut keys = [0u64; 4];
        if candidate.forms.len() <= keys.len() {
            for (key, form) in keys.iter_mut().zip(&candidate.forms) {
                *key = self.hash_str(form);
            }
            return self.judge(&keys[..candidate.forms.len()], host, &[]);
        }
        let keys: Vec<u64> = candidate.forms.iter().map(|f| self.hash_str(f)).collect();
        self.judge(&keys, host, &[])
    }
}

/// A pair of tokens as a message shows it: their text forms joined by a space.
fn pair_text(pair: &[&str]) -> String {
    let forms: Vec<String> = pair.iter().map(|t| text_form(t)).collect();
    forms.join(" ")
}

/// The check of one value of a call.
struct CallCheck<'i, 'v> {
    index: &'i ValueIndex,
    verdict: &'v mut Verdict,
    argument: &'v str,
}

impl CallCheck<'_, '_> {
    /// An identifier: the whole value, read as a text of one or more tokens, and each
    /// address, URL, host name or IBAN inside it (`Mark <mark@evil.example>`).
    fn identifier(&mut self, text: &str) {
        with_tokens(text, |chunks| {
            let several = match chunks {
                [] => return,
                [only] => {
                    self.token(only, text);
                    false
                }
                _ => {
                    let whole = self.index.hash_text_forms(chunks);
                    let judged = self.index.judge(&[whole], None, chunks);
                    self.record(judged, text);
                    true
                }
            };
            // Then, in the order the text has them, each structured token (of several; a
            // single one is the whole value), the structured values inside it, the IBANs
            // starting at it.
            for (i, token) in chunks.iter().enumerate() {
                if several && structured(token) {
                    self.token(token, token);
                }
                pieces_after(chunks, i, &mut |piece| match piece {
                    Piece::Inner(piece) => {
                        if structured(piece) {
                            self.token(piece, piece);
                        }
                    }
                    Piece::Joined(joined) => {
                        if joined.structured {
                            self.candidate(&joined, &joined.shown);
                        }
                    }
                });
            }
        });
        self.secret_words(text);
    }

    /// Confidentiality inside one value: each alphanumeric word of it that looks like a secret
    /// (letters and digits mixed in six or more characters, six or more digits, twenty or more
    /// characters), so that a key put in a URL's path or query is found as it was read.
    fn secret_words(&mut self, text: &str) {
        let lowered = text.to_lowercase();
        for word in alnum_words(&lowered) {
            let digits = word.bytes().filter(u8::is_ascii_digit).count();
            let looks_secret = (word.len() >= 6 && digits > 0 && digits < word.len())
                || digits >= 6
                || word.len() >= 20;
            if !looks_secret || word == lowered {
                continue;
            }
            let key = self.index.hash_text_forms(&[word]);
            let judged = self.index.judge(&[key], None, &[]);
            if let Some((part, origin)) = judged.secret {
                self.push(Concern::Secret, part, origin, word);
            }
        }
    }

    /// Every candidate of `text` (each token, each value inside one, each IBAN across
    /// tokens), each shown as written.
    fn every_candidate(&mut self, text: &str) {
        with_tokens(text, |chunks| {
            for (i, token) in chunks.iter().enumerate() {
                self.token(token, token);
                pieces_after(chunks, i, &mut |piece| match piece {
                    Piece::Inner(piece) => self.token(piece, piece),
                    Piece::Joined(joined) => self.candidate(&joined, &joined.shown),
                });
            }
        });
    }

    /// One token (or a value inside one), shown as `shown`: a plain word by its text form
    /// alone, anything else by its candidate's forms and host.
    fn token(&mut self, token: &str, shown: &str) {
        let judged = if plain(token) {
            let key = self.index.hash_text_forms(&[token]);
            self.index.judge(&[key], None, &[])
        } else {
            self.index
                .judge_candidate(&candidate(token, text_form(token)))
        };
        self.record(judged, shown);
    }

    /// One built candidate, shown as `shown`.
    fn candidate(&mut self, candidate: &Candidate, shown: &str) {
        let judged = self.index.judge_candidate(candidate);
        self.record(judged, shown);
    }

    fn record(&mut self, judged: Judged, shown: &str) {
        if let Some((part, origin)) = judged.untrusted {
            self.push(Concern::Untrusted, part, origin, shown);
        }
        if let Some((part, origin)) = judged.secret {
            self.push(Concern::Secret, part, origin, shown);
        }
        if judged.absent {
            self.unproven(shown);
        }
    }

    fn unproven(&mut self, shown: &str) {
        if let Some(overflow) = self.index.overflow()
            && self.verdict.unproven.is_none()
        {
            self.verdict.unproven = Some(Unproven {
                argument: self.argument.to_owned(),
                value: shown.to_owned(),
                overflow,
            });
        }
    }

    fn push(&mut self, concern: Concern, part: Part, origin: u32, shown: &str) {
        let Some(origin) = self.index.origin_at(origin) else {
            return;
        };
        let finding = Finding {
            argument: self.argument.to_owned(),
            value: shown.to_owned(),
            part,
            origin,
            concern,
        };
        let list = match concern {
            Concern::Untrusted => &mut self.verdict.untrusted,
            Concern::Secret => &mut self.verdict.secret,
        };
        if !list.contains(&finding) {
            list.push(finding);
        }
    }

    /// Free text: its runs of [`RUN_WORDS`] words (one finding of each concern per argument),
    /// its structured values as identifiers, and its secret-looking values for confidentiality.
    fn free_text(&mut self, text: &str) {
        let (joined, words) = joined_words(text);
        let (mut untrusted, mut secret, mut absent) = (false, false, false);
        let runs = words.iter().zip(words.iter().skip(RUN_WORDS - 1));
        for (&(start, _), &(_, end)) in runs {
            let run = joined.get(start..end).unwrap_or_default();
            let Some(entry) = self.index.get(self.index.hash_str(run)) else {
                absent = true;
                continue;
            };
            if !untrusted
                && !entry.owned
                && let Some(origin) = entry.untrusted
            {
                untrusted = true;
                self.push(Concern::Untrusted, Part::Run(run.to_owned()), origin, text);
            }
            if !secret
                && entry.class == Class::Secret
                && let Some(origin) = entry.secret
            {
                secret = true;
                self.push(Concern::Secret, Part::Run(run.to_owned()), origin, text);
            }
        }
        if absent {
            self.unproven(text);
        }
        for candidate in notable(text) {
            if candidate.structured {
                self.candidate(&candidate, &candidate.shown);
            } else if candidate.distinctive {
                // Not structured: it has no host.
                let judged = self.index.judge_candidate(&candidate);
                if let Some((part, origin)) = judged.secret {
                    self.push(Concern::Secret, part, origin, &candidate.shown);
                }
            }
        }
    }

    /// A script: each word the shell parser finds is a value (free text when it holds blanks),
    /// and the script's text is free text besides. A script the parser cannot read has each
    /// of its tokens checked as a value. A simple script is read quickly first
    /// ([`simple_words`]); only when that finds something is it read again by the parser, and
    /// what the quick reading found is taken back, so the verdict is the parser's.
    fn shell(&mut self, script: &str) {
        if let Some(words) = simple_words(script) {
            let before = (
                self.verdict.untrusted.len(),
                self.verdict.secret.len(),
                self.verdict.unproven.is_some(),
            );
            for word in words {
                self.every_candidate(word);
            }
            let after = (
                self.verdict.untrusted.len(),
                self.verdict.secret.len(),
                self.verdict.unproven.is_some(),
            );
            if after == before {
                self.free_text(script);
                return;
            }
            self.verdict.untrusted.truncate(before.0);
            self.verdict.secret.truncate(before.1);
            if !before.2 {
                self.verdict.unproven = None;
            }
        }
        match script_words(script) {
            Some(words) => {
                for word in words {
                    if word.contains(char::is_whitespace) {
                        self.free_text(&word);
                    } else {
                        self.every_candidate(&word);
                    }
                }
            }
            None => self.every_candidate(script),
        }
        self.free_text(script);
    }
}
