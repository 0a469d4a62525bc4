//! sed: the files a sed command writes: its operands with `-i`, and the files of `w`/`W` commands
//! and of the `w` flag of `s`, read from its scripts as GNU sed 4 reads them. A script read from a
//! file, or one the checker cannot follow, or with an `e` command or flag (which runs a shell
//! command) makes the writes unknown, unless `--sandbox` forbids `w`, `r` and `e`.

use super::words::Literal;

/// Long options: (name, takes a value).
const LONG: &[(&str, bool)] = &[
    ("expression", true),
    ("file", true),
    ("in-place", false),
    ("line-length", true),
    ("null-data", false),
    ("zero-terminated", false),
    ("posix", false),
    ("quiet", false),
    ("silent", false),
    ("regexp-extended", false),
    ("separate", false),
    ("sandbox", false),
    ("unbuffered", false),
    ("binary", false),
    ("debug", false),
    ("follow-symlinks", false),
    ("help", false),
    ("version", false),
];

/// What one sed command line asks for.
#[derive(Default)]
struct SedArgs {
    scripts: Vec<String>,
    from_file: bool,
    in_place: bool,
    sandbox: bool,
    operands: Vec<String>,
}

/// The paths a sed command (its words after `sed`) writes; Err says why they cannot be known.
pub(super) fn sed_writes(args: &[Literal]) -> Result<Vec<String>, String> {
    let mut sed = read_args(args)?;
    if sed.scripts.is_empty() && !sed.from_file && !sed.operands.is_empty() {
        let script = sed.operands.remove(0);
        sed.scripts.push(script);
    }
    let mut paths = Vec::new();
    if sed.in_place {
        paths.extend(sed.operands.iter().cloned());
    }
    if sed.sandbox {
        return Ok(paths);
    }
    if sed.from_file {
        return Err("sed reads its script from a file (add `--sandbox` to forbid writes)".into());
    }
    for script in &sed.scripts {
        script_writes(script, &mut paths)?;
    }
    Ok(paths)
}

fn read_args(args: &[Literal]) -> Result<SedArgs, String> {
    let mut sed = SedArgs::default();
    let mut i = 0;
    let mut options_done = false;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        i += 1;
        if options_done || !text.starts_with('-') || text == "-" {
            sed.operands.push(text.to_owned());
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let matches: Vec<&(&str, bool)> = LONG
                .iter()
                .filter(|(full, _)| full.starts_with(name))
                .collect();
            let exact = LONG.iter().find(|(full, _)| *full == name);
            let Some(&(full, takes_value)) = exact.or(match matches.as_slice() {
                [only] => Some(*only),
                _ => None,
            }) else {
                return Err(format!("`{text}` is not a sed option the checker knows"));
            };
            let value = if takes_value && attached.is_none() {
                let next = args.get(i).map(|w| w.text.clone());
                i += 1;
                next
            } else {
                attached
            };
            apply(&mut sed, full, value);
            continue;
        }
        let letters: Vec<char> = text.chars().skip(1).collect();
        for (at, &letter) in letters.iter().enumerate() {
            let rest: String = letters[at + 1..].iter().collect();
            match letter {
                'e' | 'f' | 'l' => {
                    let value = if rest.is_empty() {
                        let next = args.get(i).map(|w| w.text.clone());
                        i += 1;
                        next
                    } else {
                        Some(rest)
                    };
                    let full = match letter {
                        'e' => "expression",
                        'f' => "file",
                        _ => "line-length",
                    };
                    apply(&mut sed, full, value);
                    break;
                }
                'i' => {
                    // `-i` takes the rest of the word as a backup suffix.
                    sed.in_place = true;
                    break;
                }
                'n' | 'E' | 'r' | 's' | 'u' | 'z' | 'b' => {}
                other => return Err(format!("`-{other}` is not a sed option the checker knows")),
            }
        }
    }
    Ok(sed)
}

fn apply(sed: &mut SedArgs, full: &str, value: Option<String>) {
    match full {
        "expression" => sed.scripts.push(value.unwrap_or_default()),
        "file" => sed.from_file = true,
        "in-place" => sed.in_place = true,
        "sandbox" => sed.sandbox = true,
        _ => {}
    }
}

/// Reads one script (one `-e`, or the script operand) and adds the files it writes.
fn script_writes(script: &str, paths: &mut Vec<String>) -> Result<(), String> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ';') {
            i += 1;
        }
        let Some(_) = chars.get(i) else {
            return Ok(());
        };
        i = address(&chars, i, false)?;
        i = skip_blanks(&chars, i);
        if chars.get(i) == Some(&',') {
            i = skip_blanks(&chars, i + 1);
            i = address(&chars, i, true)?;
        }
        i = skip_blanks(&chars, i);
        while chars.get(i) == Some(&'!') {
            i = skip_blanks(&chars, i + 1);
        }
        let Some(&command) = chars.get(i) else {
            return Err("a sed script ends without a command".into());
        };
        i += 1;
        i = match command {
            '{' => i,
            '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
            | 'F' => end_of_command(&chars, i)?,
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' => to_line_end(&chars, i),
            ':' | 'b' | 't' | 'T' | 'v' => to_separator(&chars, i),
            'l' | 'L' | 'q' | 'Q' => {
                let mut j = skip_blanks(&chars, i);
                while chars.get(j).is_some_and(char::is_ascii_digit) {
                    j += 1;
                }
                end_of_command(&chars, j)?
            }
            'w' | 'W' => file_name(&chars, i, paths)?,
            'e' => return Err("the sed script runs a shell command (`e`)".into()),
            's' => substitute(&chars, i, paths)?,
            'y' => {
                let delimiter = delimiter(&chars, i)?;
                let j = delimited(&chars, i + 1, delimiter)?;
                let j = delimited(&chars, j, delimiter)?;
                end_of_command(&chars, j)?
            }
            other => {
                return Err(format!(
                    "`{}` is not a sed command the checker knows",
                    other.escape_default()
                ));
            }
        };
    }
}

fn skip_blanks(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
        i += 1;
    }
    i
}

/// After a command: blanks, then the end, `;`, a newline, `}` or a comment.
fn end_of_command(chars: &[char], i: usize) -> Result<usize, String> {
    let i = skip_blanks(chars, i);
    match chars.get(i) {
        None | Some(';' | '\n') => Ok(i),
        Some('}' | '#') => Ok(i),
        Some(_) => Err("a sed command is followed by text the checker does not read".into()),
    }
}

/// The index of the newline that ends the line (a backslash keeps the line going).
fn to_line_end(chars: &[char], mut i: usize) -> usize {
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 2,
            '\n' => return i,
            _ => i += 1,
        }
    }
    chars.len()
}

/// The index of the `;` or newline that ends a label.
fn to_separator(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| *c != ';' && *c != '\n') {
        i += 1;
    }
    i
}

/// A `w` file name: the rest of the line after blanks (a `;` belongs to the name).
fn file_name(chars: &[char], i: usize, paths: &mut Vec<String>) -> Result<usize, String> {
    let start = skip_blanks(chars, i);
    let end = chars[start..]
        .iter()
        .position(|c| *c == '\n')
        .map_or(chars.len(), |p| start + p);
    let name: String = chars[start..end].iter().collect();
    if name.is_empty() {
        return Err("a sed `w` has no file name".into());
    }
    if name != "/dev/stdout" && name != "/dev/stderr" {
        paths.push(name);
    }
    Ok(end)
}

fn delimiter(chars: &[char], i: usize) -> Result<char, String> {
    match chars.get(i) {
        Some(&c) if c != '\\' && c != '\n' => Ok(c),
        _ => Err("a sed `s` or `y` has no delimiter the checker reads".into()),
    }
}

/// Skips text up to an unescaped `delimiter` (a newline ends it: an error for sed); returns the
/// index past the delimiter.
fn delimited(chars: &[char], mut i: usize, delimiter: char) -> Result<usize, String> {
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            i += 2;
        } else if c == delimiter {
            return Ok(i + 1);
        } else if c == '\n' {
            break;
        } else {
            i += 1;
        }
    }
    Err("a sed regular expression or replacement is not terminated".into())
}

/// `s/re/replacement/flags`, from just after the `s`.
fn substitute(chars: &[char], i: usize, paths: &mut Vec<String>) -> Result<usize, String> {
    let delim = delimiter(chars, i)?;
    let mut j = delimited(chars, i + 1, delim)?;
    j = delimited(chars, j, delim)?;
    while let Some(&flag) = chars.get(j) {
        match flag {
            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => j += 1,
            'e' => return Err("the sed script runs a shell command (`s///e`)".into()),
            'w' => return file_name(chars, j + 1, paths),
            _ => break,
        }
    }
    end_of_command(chars, j)
}

/// Skips an address (a line number, `$`, `first~step`, `/re/`, `\cREc`; after a comma also
/// `+N` and `~N`), if there is one.
fn address(chars: &[char], mut i: usize, second: bool) -> Result<usize, String> {
    match chars.get(i) {
        Some('$') => Ok(i + 1),
        Some(c) if c.is_ascii_digit() || (second && (*c == '+' || *c == '~')) => {
            i += 1;
            while chars
                .get(i)
                .is_some_and(|c| c.is_ascii_digit() || *c == '~')
            {
                i += 1;
            }
            Ok(i)
        }
        Some('/') => regex_flags(chars, delimited(chars, i + 1, '/')?),
        Some('\\') => {
            let delim = delimiter(chars, i + 1)?;
            regex_flags(chars, delimited(chars, i + 2, delim)?)
        }
        _ => Ok(i),
    }
}

fn regex_flags(chars: &[char], mut i: usize) -> Result<usize, String> {
    while chars.get(i).is_some_and(|c| *c == 'I' || *c == 'M') {
        i += 1;
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(script: &str) -> Result<Vec<String>, String> {
        let mut paths = Vec::new();
        script_writes(script, &mut paths).map(|()| paths)
    }

    #[test]
    fn a_sed_script_writes_only_through_w() {
        assert_eq!(writes("s/new/old/g"), Ok(vec![]));
        assert_eq!(writes("s/window/door/;p"), Ok(vec![]));
        assert_eq!(writes("/x/,/y/{s|a|b|;d}"), Ok(vec![]));
        assert_eq!(writes("1~2p;$!N"), Ok(vec![]));
        assert_eq!(writes("a\\\nw /not/a/command"), Ok(vec![]));
        assert_eq!(writes("y/abc/xyz/"), Ok(vec![]));
        assert_eq!(writes("w /tmp/out"), Ok(vec!["/tmp/out".into()]));
        assert_eq!(writes("s/a/b/w out;x"), Ok(vec!["out;x".into()]));
        assert_eq!(writes("1W  f\np"), Ok(vec!["f".into()]));
        assert_eq!(writes("/a/w /dev/stdout"), Ok(vec![]));
        for (script, why) in [
            ("e ls", "runs a shell command (`e`)"),
            ("s/a/b/e", "runs a shell command (`s///e`)"),
            ("s/a/b", "is not terminated"),
            ("k", "`k` is not a sed command"),
        ] {
            let result = writes(script);
            assert!(
                result.as_ref().is_err_and(|e| e.contains(why)),
                "{script:?}: {result:?}"
            );
        }
    }
}
