//! Which shell's rules judge a script: bash for the `shell` tool's own script, POSIX sh (dash)
//! for the scripts of `sh -c`/`dash -c` and for the whole script when the tool falls back to
//! `/bin/sh`. Anything the two read differently is refused under sh's rules, and a differential
//! test runs every script the checker covers under sh's rules through both bash and dash.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use policy::shell::{
    Dialect, NotCovered, covers_script, covers_script_as, touches_script, touches_script_as,
};

use testkit::prefixes;

use crate::{Reason, refused_as};

/// The grants of these tests: programs that write nothing, so that any difference between the
/// two shells' logs is a command one of them ran and the other did not.
fn granted() -> Vec<Vec<String>> {
    prefixes(&["ls", "echo", "cat", "true", "grep", "wc"])
}

fn posix(script: &str) -> Result<(), NotCovered> {
    covers_script_as(script, &granted(), Dialect::Posix)
}

fn bash(script: &str) -> Result<(), NotCovered> {
    covers_script_as(script, &granted(), Dialect::Bash)
}

/// Scripts bash and dash read differently: each is refused under sh's rules, for the reason
/// given (what bash alone has is a dialect difference; what both shells have but the checker
/// refuses anyway keeps its own reason).
const DIFFERENT: &[(&str, Reason, &str)] = &[
    (
        "ls $'\\' ; touch pwned # '",
        NotCovered::ShellDialect,
        "`$'…`",
    ),
    ("ls $'a' b", NotCovered::ShellDialect, "`$'…`"),
    ("echo $'\\x41'", NotCovered::ShellDialect, "`$'…`"),
    ("ls x$'y'", NotCovered::ShellDialect, "`$'…`"),
    (
        "ls \"a\"$'\\'' ; touch pwned #'",
        NotCovered::ShellDialect,
        "`$'…`",
    ),
    ("ls $\"x\"", NotCovered::ShellDialect, "`$\"…`"),
    (
        "ls $\"\\\" ; touch pwned #\"",
        NotCovered::ShellDialect,
        "`$\"…`",
    ),
    ("echo \"$'\"", NotCovered::ShellDialect, "`$'…`"),
    ("[[ -f x ]] && ls", NotCovered::Unsupported, "[["),
    ("[[ x ]]", NotCovered::Unsupported, "[["),
    ("((1)) && ls", NotCovered::ShellDialect, "`((`"),
    ("((ls))", NotCovered::ShellDialect, "`((`"),
    ("ls &> out", NotCovered::ShellDialect, "`&>`"),
    ("ls &>> out", NotCovered::ShellDialect, "`&>>`"),
    ("ls |& cat", NotCovered::ShellDialect, "`|&`"),
    ("cat <<< hi", NotCovered::ShellDialect, "`<<<`"),
    ("ls ;& ls", NotCovered::ShellDialect, "`;&`"),
    ("ls ;;& ls", NotCovered::ShellDialect, "`;;&`"),
    ("cat <(ls)", NotCovered::ShellDialect, "`<(`"),
    ("ls >(cat)", NotCovered::ShellDialect, "`>(`"),
    ("function f { ls; }", NotCovered::FunctionDefinition, "`f`"),
    ("function f", NotCovered::FunctionDefinition, "`f`"),
    ("time ls", NotCovered::ShellDialect, "`time`"),
    ("time -p ls", NotCovered::ShellDialect, "`time`"),
    ("! ! ls", NotCovered::ShellDialect, "`! !`"),
    ("ls {a,b}", NotCovered::Glob, "`{a,b}`"),
    ("echo a{b,c}d", NotCovered::Glob, "`a{b,c}d`"),
    ("echo {1..3}", NotCovered::Glob, "`{1..3}`"),
    ("ls a=~/x", NotCovered::ShellDialect, "a `~` inside a word"),
    (
        "ls --opt=~",
        NotCovered::ShellDialect,
        "a `~` inside a word",
    ),
    ("ls a:~", NotCovered::ShellDialect, "a `~` inside a word"),
    ("coproc ls", NotCovered::Builtin, "`coproc`"),
    (
        "select x in a; do ls; done",
        NotCovered::ControlFlow,
        "`select`",
    ),
];

#[test]
fn a_script_that_sh_runs_is_judged_by_posix_rules() {
    for &(script, want, part) in DIFFERENT {
        let result = posix(script);
        assert!(
            refused_as(&result, want, part),
            "{script:?} under sh's rules: want {:?} with {part:?}, got {result:?}",
            want(String::new())
        );
    }
    for script in ["ls $'\\' ; touch pwned # '", "ls $\"x\"", "time ls"] {
        assert!(
            matches!(posix(script), Err(NotCovered::ShellDialect(_))),
            "{script:?}: {:?}",
            posix(script)
        );
    }
    // The same text that sh refuses, bash reads as it runs it.
    assert_eq!(bash("ls $'\\' ; touch pwned # '"), Ok(()));
    assert_eq!(bash("time ls"), Ok(()));
    assert_eq!(bash("ls a=~/x"), Ok(()));
    for script in [
        "ls -la",
        "echo 'a b' \"c\" d\\ e",
        "ls && cat x || true",
        "(ls); { echo; }",
    ] {
        assert_eq!(posix(script), Ok(()), "{script:?}");
    }
}

#[test]
fn a_script_of_sh_c_inside_a_bash_script_is_judged_by_posix_rules() {
    let attack = "sh -c \"ls \\$'\\\\' ; touch pwned # '\"";
    assert_eq!(
        covers_script(attack, &granted()),
        Err(NotCovered::ShellDialect("$'…".into())),
        "{attack}"
    );
    for shell in [
        "sh",
        "dash",
        "/bin/sh",
        "/usr/bin/sh",
        "/bin/dash",
        "/usr/bin/dash",
    ] {
        for &(inner, want, part) in DIFFERENT {
            let quoted = inner.replace('\'', "'\\''");
            let script = format!("{shell} -c '{quoted}'");
            // `<<` is refused in the raw text before any script is read (brush's tokenizer can
            // loop on some heredocs), so bash, reading the outer script, names the redirection.
            let (want, part) = if inner.contains("<<<") {
                (NotCovered::Redirection as Reason, "`<<<`")
            } else {
                (want, part)
            };
            let result = bash(&script);
            assert!(
                refused_as(&result, want, part),
                "{script:?}: want {:?} with {part:?}, got {result:?}",
                want(String::new())
            );
        }
        assert_eq!(bash(&format!("{shell} -c 'ls -l'")), Ok(()));
    }
    // bash inside sh inside bash: the innermost is bash's again.
    assert_eq!(bash("sh -c \"bash -c 'time ls'\""), Ok(()));
    assert_eq!(
        bash("bash -c \"sh -c 'time ls'\""),
        Err(NotCovered::ShellDialect("time".into()))
    );
    // A `$'…'` word never becomes a script, whoever runs it.
    for shell in ["sh", "bash"] {
        let result = bash(&format!("{shell} -c $'ls'"));
        assert!(
            matches!(&result, Err(NotCovered::Unsupported(what))
                if what.contains(&format!("the script of `{shell} -c`"))),
            "{shell}: {result:?}"
        );
    }
    // `$'…'` as an argument after the prefix stays accepted in bash.
    assert_eq!(bash("echo $'a\\tb'"), Ok(()));
}

#[test]
fn the_whole_script_is_judged_by_posix_rules_when_sh_runs_it() {
    assert!(posix("sh -c 'ls'").is_ok());
    assert!(posix("bash -c 'time ls'").is_ok());
    assert_eq!(
        posix("bash -c 'ls' && time ls"),
        Err(NotCovered::ShellDialect("time".into()))
    );
    let push = prefixes(&["git push"]);
    assert!(touches_script_as("git push", &push, Dialect::Posix));
    assert!(touches_script_as(
        "ls; sh -c 'git push'",
        &push,
        Dialect::Posix
    ));
    // Not readable under sh's rules: no allow grant covers it either.
    assert!(!touches_script_as("git push $'x'", &push, Dialect::Posix));
    assert!(touches_script("git push $'x'", &push));
}

#[test]
fn a_dollar_quote_escape_by_number_is_refused_rather_than_guessed() {
    for script in [
        "echo $'\\x2dv'",
        "echo $'\\101'",
        "echo $'\\u0041'",
        "echo $'\\U00000041'",
        "echo $'\\cA'",
        "echo $'\\0'",
    ] {
        let result = bash(script);
        let word = script.trim_start_matches("echo ");
        assert!(
            refused_as(
                &result,
                NotCovered::Unsupported,
                &format!("`{word}`: a `$'…'` escape by number")
            ),
            "{script:?}: {result:?}"
        );
    }
    assert_eq!(bash("echo $'\\q \\n \\\\ \\' \\\" \\?'"), Ok(()));
    let printf = prefixes(&["printf"]);
    let result = covers_script("printf $'\\x2dv' PATH x", &printf);
    assert!(
        refused_as(
            &result,
            NotCovered::Unsupported,
            "`$'\\x2dv'`: a `$'…'` escape by number"
        ),
        "{result:?}"
    );
}

// ---- The differential test -------------------------------------------------------------------

const BASH: &str = "/usr/bin/bash";
const DASH: &str = "/usr/bin/dash";

/// Programs the scripts may run; each is a shim that logs its name and arguments.
const SHIMS: &[&str] = &[
    "ls", "cat", "echo", "true", "grep", "wc", "touch", "rm", "pwned", "x", "a", "b", "time",
    "function", "f", "select", "coproc", "printf", "id", "[[", "]]", "{a,b}",
];

/// A folder with the shims, `sh`/`dash`/`bash` that log and run the real shells, a log file and
/// an empty working folder.
struct Lab {
    _root: tempfile::TempDir,
    bin: PathBuf,
    log: PathBuf,
    work: PathBuf,
}

fn write_exec(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

impl Lab {
    fn new() -> Lab {
        assert!(
            Path::new(BASH).exists(),
            "the differential test needs {BASH}"
        );
        assert!(
            Path::new(DASH).exists(),
            "the differential test needs {DASH}"
        );
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        let work = root.path().join("work");
        fs::create_dir(&bin).unwrap();
        fs::create_dir(&work).unwrap();
        // One append per line, so that the commands of a pipeline never mix their lines.
        let log_line = "line=${0##*/}\nfor a in \"$@\"; do line=\"$line [$a]\"; done\nprintf '%s\\n' \"$line\" >> \"$SHIM_LOG\"\n";
        for name in SHIMS {
            write_exec(&bin.join(name), &format!("#!{DASH}\n{log_line}"));
        }
        for (name, real) in [("sh", DASH), ("dash", DASH), ("bash", BASH)] {
            write_exec(
                &bin.join(name),
                &format!("#!{DASH}\n{log_line}exec {real} \"$@\"\n"),
            );
        }
        Lab {
            log: root.path().join("log"),
            bin,
            work,
            _root: root,
        }
    }

    /// Runs `script` with `shell -c` and returns its exit status and what the shims logged (the
    /// lines sorted: the commands of a pipeline run at the same time).
    fn run(&self, shell: &str, script: &str) -> (Option<i32>, Vec<String>) {
        let _ = fs::remove_file(&self.log);
        let status = Command::new(shell)
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", &self.bin)
            .env("SHIM_LOG", &self.log)
            .env("HOME", "/nonexistent-home")
            .current_dir(&self.work)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let mut lines: Vec<String> = log.lines().map(str::to_owned).collect();
        lines.sort();
        (status.code(), lines)
    }
}

/// Hand-written scripts: the attack and its variants (refused, so not run), and ordinary ones.
const SCRIPTS: &[&str] = &[
    "ls",
    "ls -la a b",
    "ls 'a b' \"c d\" e\\ f",
    "ls a#b # comment ; touch pwned",
    "ls 'it'\\''s'",
    "ls \"a\\\"b\" 'c\\d' \"e\\\\f\" \"g\\h\"",
    "ls \\\n a",
    "ls 'x\ny'",
    "ls && cat x || true",
    "ls | grep a | wc -l",
    "(ls a); { cat b; }",
    "( ( ls ) )",
    "! ls",
    "ls ~ ~/a",
    "ls '~' a'~'",
    "ls {} @{u} '{a,b}' \\{a,b\\}",
    "ls a] [ '[x]'",
    "sh -c 'ls a'",
    "sh -c \"ls 'b c'\"",
    "dash -c 'sh -c \"cat d\"'",
    "bash -c 'ls e'",
    "ls $'\\' ; touch pwned # '",
    "ls $'a\\'' ; touch pwned #'",
    "ls $\"a\" ; touch pwned",
    "echo $'\\'' ; touch pwned #'",
    "[[ -n x ]] && touch pwned",
    "((1)) || touch pwned",
    "ls &> a; touch pwned",
    "ls |& touch pwned",
    "cat <<< x; touch pwned",
    "function ls { touch pwned; }; ls",
    "time ls",
    "! ! ls",
    "ls {a,pwned}",
    "ls a=~/x b:~",
    "sh -c \"ls \\$'\\\\' ; touch pwned # '\"",
    "echo 'a\\nb' && cat",
    "true; ls x; true",
    "ls --color=never -- -x",
    "ls ';' '&&' '|' '#'",
    "ls a\\;b a\\&b a\\|b",
    "ls 'é' ü 日本",
    "ls a\tb",
    "{ ls; } && ( cat )",
    "ls;ls;ls",
    "ls||ls&&ls",
    "ls # x \\\ntouch pwned",
    "ls '#' x \\\ntouch pwned",
    "ls a\\\n#x\ntouch pwned",
    "ls \\#x\ntouch pwned",
    "ls ;\\\n ls",
    "ls \\\r\nls",
    "ls }; { ls; }",
    "ls !x ! a",
    "echo \"a\\\nb\" 'c\\\nd'",
];

/// Pieces the random scripts are made of.
const PIECES: &[&str] = &[
    "ls", "cat", "echo", "touch", "pwned", "true", " ", " ", " ", " a", " b", ";", "&&", "||", "|",
    "'", "\"", "\\", "$'", "$\"", "#", "{", "}", "(", ")", ",", "..", "~", "=", "!", "time", "[[",
    "]]", "\n", "sh -c ", "x", "'x'", "\"y\"", "\\'", ":", "-", "--", "{a,b}", "&", "<",
];

/// A small fixed-seed generator, so that the test is the same on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

fn random_scripts(count: usize) -> Vec<String> {
    let mut rng = XorShift(0x5eed_cafe_f00d_1234);
    (0..count)
        .map(|_| {
            let mut script = String::from(["ls", "cat", "echo"][rng.next(3)]);
            for _ in 0..rng.next(10) + 1 {
                script.push_str(PIECES[rng.next(PIECES.len())]);
            }
            script
        })
        .collect()
}

#[test]
fn every_script_covered_under_posix_rules_runs_the_same_commands_in_bash_and_dash() {
    let lab = Lab::new();
    // The lab itself tells the shells apart where they differ.
    let attack = "ls $'\\' ; touch pwned # '";
    assert_ne!(lab.run(BASH, attack), lab.run(DASH, attack));
    let mut scripts: Vec<String> = SCRIPTS.iter().map(|s| (*s).to_owned()).collect();
    scripts.extend(random_scripts(3000));
    let mut ran = 0;
    let mut differ = Vec::new();
    for script in &scripts {
        // Any refusal (whatever its reason) takes the script out: only covered scripts run.
        if posix(script).is_err() {
            continue;
        }
        ran += 1;
        let in_bash = lab.run(BASH, script);
        let in_dash = lab.run(DASH, script);
        if in_bash != in_dash {
            differ.push(format!(
                "{script:?}\n  bash: {in_bash:?}\n  dash: {in_dash:?}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} covered scripts run differently:\n{}",
        differ.len(),
        differ.join("\n")
    );
    eprintln!("{ran} covered scripts ran in bash and dash");
    assert!(ran >= 80, "only {ran} scripts were covered and run");
}

mod properties {
    use super::*;
    use policy::shell::write_targets;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn what_posix_rules_cover_bash_rules_cover_too(
            script in proptest::collection::vec(
                prop_oneof![
                    Just("ls"), Just("echo"), Just(" "), Just(" a"), Just(";"), Just("&&"),
                    Just("|"), Just("'"), Just("\""), Just("\\"), Just("$'"), Just("$\""),
                    Just("#"), Just("{"), Just("}"), Just("("), Just(")"), Just(","), Just("~"),
                    Just("="), Just("!"), Just("time"), Just("[["), Just("\n"), Just("sh -c "),
                    Just("bash -c "), Just("touch"), Just("-o"), Just("cd"), Just("git"),
                ],
                0..24,
            )
        ) {
            let script: String = script.concat();
            if posix(&script).is_ok() {
                prop_assert_eq!(bash(&script), Ok(()), "{:?}", script);
            }
            let _ = write_targets(&script, Dialect::Posix);
            let _ = write_targets(&script, Dialect::Bash);
            let _ = touches_script_as(&script, &granted(), Dialect::Posix);
        }

        #[test]
        fn the_new_entry_points_never_panic_on_any_string(script in any::<String>()) {
            let _ = covers_script_as(&script, &granted(), Dialect::Posix);
            let _ = touches_script_as(&script, &granted(), Dialect::Bash);
            let _ = write_targets(&script, Dialect::Bash);
        }
    }
}
