//! The check of a call's values against the session's index (the rules are in the module
//! documentation of [`crate::provenance`]).

use proto::Class;

use super::index::{Entry, ValueIndex};
use super::normal::alnum_words;
use super::scan::{Candidate, notable, scan};
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

    /// One identifier: its forms, then its host, then its pairs of tokens.
    fn judge(&self, forms: &[String], host: Option<&str>, tokens: &[String]) -> Judged {
        let mut judged = Judged::default();
        let whole: Vec<&Entry> = forms
            .iter()
            .filter_map(|f| self.get(self.hash_str(f)))
            .collect();
        let owned = whole.iter().any(|e| e.owned);
        if let Some(secret) = whole.iter().find(|e| e.class == Class::Secret) {
            judged.secret = secret.secret.map(|o| (Part::Whole, o));
        }
        if owned {
            return judged;
        }
        if let Some(origin) = whole.iter().find_map(|e| e.untrusted) {
            judged.untrusted = Some((Part::Whole, origin));
            return judged;
        }
        let mut found = !whole.is_empty();
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
                let Some(entry) = self.get(self.hash(pair)) else {
                    continue;
                };
                pairs_found += 1;
                let run = pair.join(" ");
                if entry.class == Class::Secret && judged.secret.is_none() {
                    judged.secret = entry.secret.map(|o| (Part::Run(run.clone()), o));
                }
                if !entry.owned
                    && let Some(origin) = entry.untrusted
                    && judged.untrusted.is_none()
                {
                    judged.untrusted = Some((Part::Run(run), origin));
                }
            }
            found |= pairs_found == tokens.len() - 1;
        }
        judged.absent = !found;
        judged
    }
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
        let scanned = scan(text);
        let Some(first) = scanned.candidates.first() else {
            return;
        };
        let rest = if scanned.tokens.len() == 1 {
            self.candidate(first, &[], text);
            &scanned.candidates[1..]
        } else {
            let whole = Candidate {
                shown: text.to_owned(),
                forms: vec![scanned.tokens.join(" ")],
                ..Candidate::default()
            };
            self.candidate(&whole, &scanned.tokens, text);
            &scanned.candidates[..]
        };
        for inner in rest.iter().filter(|c| c.structured) {
            self.candidate(inner, &[], &inner.shown);
        }
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
            let judged = self.index.judge(&[word.to_owned()], None, &[]);
            if let Some((part, origin)) = judged.secret {
                self.push(Concern::Secret, part, origin, word);
            }
        }
    }

    /// One candidate value, with the tokens it is made of when there are several.
    fn candidate(&mut self, candidate: &Candidate, tokens: &[String], shown: &str) {
        let judged = self
            .index
            .judge(&candidate.forms, candidate.host.as_deref(), tokens);
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
        let lowered = text.to_lowercase();
        let words: Vec<&str> = alnum_words(&lowered).collect();
        let (mut untrusted, mut secret, mut absent) = (false, false, false);
        for run in words.windows(RUN_WORDS) {
            let Some(entry) = self.index.get(self.index.hash(run)) else {
                absent = true;
                continue;
            };
            if !untrusted
                && !entry.owned
                && let Some(origin) = entry.untrusted
            {
                untrusted = true;
                self.push(Concern::Untrusted, Part::Run(run.join(" ")), origin, text);
            }
            if !secret
                && entry.class == Class::Secret
                && let Some(origin) = entry.secret
            {
                secret = true;
                self.push(Concern::Secret, Part::Run(run.join(" ")), origin, text);
            }
        }
        if absent {
            self.unproven(text);
        }
        for candidate in notable(text) {
            if candidate.structured {
                self.candidate(&candidate, &[], &candidate.shown);
            } else if candidate.distinctive {
                let judged = self.index.judge(&candidate.forms, None, &[]);
                if let Some((part, origin)) = judged.secret {
                    self.push(Concern::Secret, part, origin, &candidate.shown);
                }
            }
        }
    }

    /// A script: each word the shell parser finds is a value (free text when it holds blanks),
    /// and the script's text is free text besides. A script the parser cannot read has each
    /// of its tokens checked as a value.
    fn shell(&mut self, script: &str) {
        match script_words(script) {
            Some(words) => {
                for word in words {
                    if word.contains(char::is_whitespace) {
                        self.free_text(&word);
                    } else {
                        for candidate in scan(&word).candidates {
                            self.candidate(&candidate, &[], &candidate.shown);
                        }
                    }
                }
            }
            None => {
                for candidate in scan(script).candidates {
                    self.candidate(&candidate, &[], &candidate.shown);
                }
            }
        }
        self.free_text(script);
    }
}
