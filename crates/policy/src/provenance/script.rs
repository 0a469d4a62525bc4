//! A quick reading of the simplest scripts (words, pipes, lists and `2>&1`), so that the
//! check of a clean `shell` call does not pay for the full shell parser.
//!
//! For a script it accepts, [`simple_words`] gives every word the parser's reading
//! ([`crate::shell::script_words`]) gives, and perhaps more (assignments and the arguments a
//! nested shell would read again are words here too): a script whose words are all clean here
//! is clean by the parser's words too. The check takes this reading only when it finds nothing;
//! otherwise it reads the script again with the parser, so that what it reports, and in which
//! order, is the parser's.

use crate::shell::MAX_SCRIPT_BYTES;

/// bash's reserved words: a script with one of them anywhere is left to the parser (they make
/// compound commands, and a script with a stray one does not parse).
const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

/// Whether `byte` may be in a word of a simple script: letters, digits and `-_./,:@%+=`, none
/// of which the shell reads as anything but itself.
fn word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-_./,:@%+=".contains(&byte)
}

/// What separates two words.
fn blank(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

/// The words of `script` when it is simple: commands of plain words (see [`word_byte`])
/// separated by blanks, joined by `|`, `||`, `&&`, `;` or newlines, each command starting with
/// a word and none empty, with descriptor duplications (`2>&1`, `>&2`, `2>&-`) after the first
/// word, whose target is a word too; no reserved word. None for any other script.
pub(super) fn simple_words(script: &str) -> Option<Vec<&str>> {
    if script.len() > MAX_SCRIPT_BYTES {
        return None;
    }
    let bytes = script.as_bytes();
    let mut words = Vec::new();
    // Words in the current command (0: the next thing must be a word).
    let mut in_command = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if blank(b) {
            i += 1;
            continue;
        }
        let operator = match (b, bytes.get(i + 1).copied()) {
            (b'|', Some(b'|')) | (b'&', Some(b'&')) => Some(2),
            (b'|', Some(b'&')) => return None,
            (b'|' | b';' | b'\n', _) => Some(1),
            _ => None,
        };
        if let Some(len) = operator {
            if in_command == 0 {
                return None;
            }
            in_command = 0;
            i += len;
            continue;
        }
        let start = i;
        while bytes.get(i).copied().is_some_and(word_byte) {
            i += 1;
        }
        let run = script.get(start..i)?;
        if bytes.get(i) == Some(&b'>') {
            // `[n]>&m` or `[n]>&-`: n one digit at most, m one digit, then a boundary.
            let target = i + 2;
            let io_number =
                run.is_empty() || (run.len() == 1 && run.as_bytes()[0].is_ascii_digit());
            let duplicates = bytes.get(i + 1) == Some(&b'&')
                && bytes
                    .get(target)
                    .is_some_and(|t| t.is_ascii_digit() || *t == b'-');
            let ends = bytes
                .get(target + 1)
                .is_none_or(|&n| blank(n) || matches!(n, b'|' | b';' | b'\n' | b'&'));
            if !io_number || !duplicates || !ends || in_command == 0 {
                return None;
            }
            words.push(script.get(target..=target)?);
            i = target + 1;
            continue;
        }
        if run.is_empty() || RESERVED.contains(&run) {
            return None;
        }
        if bytes
            .get(i)
            .is_some_and(|&n| !blank(n) && !matches!(n, b'|' | b';' | b'\n' | b'&'))
        {
            return None;
        }
        words.push(run);
        in_command += 1;
    }
    (in_command > 0).then_some(words)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::shell::script_words;

    #[test]
    fn a_simple_script_gives_its_words_and_its_duplication_targets() {
        assert_eq!(
            simple_words("cargo test -p policy --release -- provenance 2>&1 | tail -n 20").unwrap(),
            [
                "cargo",
                "test",
                "-p",
                "policy",
                "--release",
                "--",
                "provenance",
                "1",
                "tail",
                "-n",
                "20"
            ]
        );
        assert_eq!(
            simple_words("make check&&git status;ls >&2").unwrap(),
            ["make", "check", "git", "status", "ls", "2"]
        );
    }

    #[test]
    fn anything_but_a_simple_script_is_left_to_the_parser() {
        for script in [
            "",
            "   ",
            "echo 'quoted'",
            "echo \"$HOME\"",
            "echo $(id)",
            "ls ~",
            "ls *.rs",
            "a # comment",
            "a &",
            "a &&",
            "| a",
            "a ;; b",
            "a;",
            "a\n",
            "a > out",
            "a 2>&1b",
            "a>&1",
            "2>&1 a",
            "a 12>&1",
            "a |& b",
            "if true; then a; fi",
            "a done",
            "échange",
            "a\\ b",
        ] {
            assert_eq!(simple_words(script), None, "{script:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The quick reading's words hold every word of the parser's reading, and the parser
        /// reads every script the quick reading accepts.
        #[test]
        fn a_script_read_quickly_holds_every_word_the_parser_reads(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "B2", "-x", "--", "x=1", "A=b", "sh", "bash", "-c", "if", "fi", "then",
                    "do", "done", "in", "for", "time", "x.y/z", "u@h.example", "%s", "+1", ",",
                    ":", "=", "2>&1", ">&2", "2>&-", "1>&2", " ", " ", " ", "  ", "\t", "|", "||",
                    "&&", ";", "\n", "&", ">", "'", "\"", "$", "#", "~", "*", "{", "}", "(", ")",
                    "!", "\\", "é",
                ]),
                1..14,
            ),
        ) {
            let script: String = parts.concat();
            if let Some(quick) = simple_words(&script) {
                let parsed = script_words(&script);
                proptest::prop_assert!(parsed.is_some(), "{:?} does not parse", script);
                for word in parsed.unwrap_or_default() {
                    proptest::prop_assert!(
                        quick.contains(&word.as_str()),
                        "{:?}: {:?} not in {:?}", script, word, quick
                    );
                }
            }
        }
    }
}
