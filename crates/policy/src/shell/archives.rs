//! Archivers and downloaders read by their own code: tar (old-style option clusters, `-C`,
//! extraction), curl (`-O` names files after the URL), unzip and cpio (extractions that may leave
//! the folder).

use super::NotCovered;
use super::words::Literal;
use super::writers::long_matches;

/// tar's short options that take a value (in a cluster, the rest of the word or the next word;
/// in an old-style first word, the next words in order).
const TAR_VALUE_LETTERS: &str = "bCfFgHIKLNTVX";

/// tar's long options whose value is a written file.
const TAR_WRITE_LONG: &[&str] = &["file", "listed-incremental", "index-file", "volno-file"];

/// Reads a tar command (its words after `tar`), reporting each written path (with whether a
/// leading `~` in it is one the shell expands) and each folder it works in (`chdir`). Extraction writes into the current
/// folder and the `-C` folders; with `-P` (absolute names) or a name transformation, where it
/// writes cannot be known.
pub(super) fn tar_writes(
    args: &[Literal],
    report: &mut dyn FnMut(String, bool, bool),
) -> Result<(), NotCovered> {
    let mut extract = false;
    let mut absolute = false;
    let mut transform = false;
    let mut remove_files = false;
    let mut operands: Vec<&Literal> = Vec::new();
    let mut i = 0;
    // Old style: `tar xzf FILE`, each value letter taking the next word.
    if let Some(first) = args.first()
        && !first.text.starts_with('-')
    {
        i = 1;
        for letter in first.text.chars() {
            if TAR_VALUE_LETTERS.contains(letter) {
                let value = args.get(i).map(|w| (w.text.as_str(), w.leading_tilde));
                i += 1;
                tar_letter(letter, value, report);
            } else {
                extract |= letter == 'x';
                absolute |= letter == 'P';
            }
        }
    }
    let mut options_done = false;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        i += 1;
        if options_done || text == "-" || !text.starts_with('-') {
            operands.push(word);
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some((value, false))),
                None => (long, None),
            };
            let writes =
                long_matches(name, TAR_WRITE_LONG) || long_matches(name, &["one-top-level"]);
            let chdir = long_matches(name, &["directory"]);
            if writes || chdir {
                let value = match attached {
                    Some(value) => Some(value),
                    // `--one-top-level` takes its value only after `=`.
                    None if long_matches(name, &["one-top-level"]) => None,
                    None => {
                        let next = args.get(i).map(|w| (w.text.as_str(), w.leading_tilde));
                        i += 1;
                        next
                    }
                };
                if let Some((value, expands)) = value {
                    report(value.to_owned(), expands, chdir);
                }
            }
            extract |= long_matches(name, &["extract", "get"]);
            absolute |= long_matches(name, &["absolute-names"]);
            transform |= long_matches(name, &["transform", "xform"]);
            remove_files |= long_matches(name, &["remove-files"]);
            continue;
        }
        for (at, letter) in text.char_indices().skip(1) {
            if TAR_VALUE_LETTERS.contains(letter) {
                let rest = &text[at + letter.len_utf8()..];
                let value = if rest.is_empty() {
                    let next = args.get(i).map(|w| (w.text.as_str(), w.leading_tilde));
                    i += 1;
                    next
                } else {
                    Some((rest, false))
                };
                tar_letter(letter, value, report);
                break;
            }
            extract |= letter == 'x';
            absolute |= letter == 'P';
        }
    }
    if remove_files {
        for operand in operands {
            report(operand.text.clone(), operand.leading_tilde, false);
        }
    }
    if extract {
        if absolute || transform {
            return Err(NotCovered::UnknownWrite(
                "tar extracts with absolute names or renamed members, which may land anywhere"
                    .into(),
            ));
        }
        report(".".into(), true, false);
    }
    Ok(())
}

/// Reports the value of a tar short option: the archive (`-f`), the incremental list (`-g`), the
/// folder (`-C`).
fn tar_letter(
    letter: char,
    value: Option<(&str, bool)>,
    report: &mut dyn FnMut(String, bool, bool),
) {
    if let Some((value, expands)) = value {
        match letter {
            'f' | 'g' => report(value.to_owned(), expands, false),
            'C' => report(value.to_owned(), expands, true),
            _ => {}
        }
    }
}

/// Whether curl names output files after the URL or the server (`-O`, `-J`,
/// `--remote-name`, `--remote-name-all`, `--remote-header-name`): they land in the current
/// folder (or `--output-dir`).
pub(super) fn curl_names_files(args: &[Literal]) -> bool {
    args.iter().any(|word| {
        let text = word.text.as_str();
        match text.strip_prefix("--") {
            Some(long) => {
                let name = long.split('=').next().unwrap_or(long);
                long_matches(
                    name,
                    &["remote-name", "remote-name-all", "remote-header-name"],
                )
            }
            None => text.starts_with('-') && text.chars().skip(1).any(|c| c == 'O' || c == 'J'),
        }
    })
}

/// unzip with `-:` (keep `../` in member names) and cpio extracting without
/// `--no-absolute-filenames` may write anywhere: Err says so.
pub(super) fn refuse_unsafe_extraction(name: &str, args: &[Literal]) -> Result<(), String> {
    if name == "unzip" {
        if args
            .iter()
            .any(|a| a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains(':'))
        {
            return Err("`unzip -:` keeps `../` in member names, so it may write anywhere".into());
        }
        return Ok(());
    }
    let extracts = args.iter().any(|a| {
        let text = a.text.as_str();
        match text.strip_prefix("--") {
            Some(long) => long.len() >= 2 && "extract".starts_with(long),
            None => text.starts_with('-') && text.contains('i'),
        }
    });
    let safe = args.iter().any(|a| a.text == "--no-absolute-filenames");
    if extracts && !safe {
        return Err(
            "`cpio` extracts absolute member names unless `--no-absolute-filenames` is given"
                .into(),
        );
    }
    Ok(())
}
