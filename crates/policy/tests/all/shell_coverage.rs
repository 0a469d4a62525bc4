//! Shell coverage: which scripts a set of granted prefixes covers, and why the others are not.

use policy::shell::{MAX_SCRIPT_BYTES, NotCovered, covers_script, prefix_warning, prefix_words};
use proptest::prelude::*;

/// The grants every table below is checked against.
fn grants() -> Vec<Vec<String>> {
    testkit::prefixes(testkit::COVERAGE_PREFIXES)
}

/// A verdict without its detail, so that tables stay readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V {
    Covered,
    Unparsable,
    TooLong,
    Substitution,
    Assignment,
    Redirection,
    Background,
    FunctionDefinition,
    Builtin,
    Glob,
    ControlFlow,
    Unsupported,
    NoPrefix,
    TooDeep,
    Empty,
    ShellDialect,
    GitOption,
    UnknownWrite,
}

fn verdict_with(script: &str, prefixes: &[Vec<String>]) -> V {
    match covers_script(script, prefixes) {
        Ok(()) => V::Covered,
        Err(NotCovered::Unparsable(_)) => V::Unparsable,
        Err(NotCovered::TooLong(_)) => V::TooLong,
        Err(NotCovered::Substitution(_)) => V::Substitution,
        Err(NotCovered::Assignment(_)) => V::Assignment,
        Err(NotCovered::Redirection(_)) => V::Redirection,
        Err(NotCovered::Background) => V::Background,
        Err(NotCovered::FunctionDefinition(_)) => V::FunctionDefinition,
        Err(NotCovered::Builtin(_)) => V::Builtin,
        Err(NotCovered::Glob(_)) => V::Glob,
        Err(NotCovered::ControlFlow(_)) => V::ControlFlow,
        Err(NotCovered::Unsupported(_)) => V::Unsupported,
        Err(NotCovered::NoPrefix(_)) => V::NoPrefix,
        Err(NotCovered::TooDeep) => V::TooDeep,
        Err(NotCovered::Empty) => V::Empty,
        Err(NotCovered::ShellDialect(_)) => V::ShellDialect,
        Err(NotCovered::GitOption(_)) => V::GitOption,
        Err(NotCovered::UnknownWrite(_)) => V::UnknownWrite,
    }
}

fn verdict(script: &str) -> V {
    verdict_with(script, &grants())
}

thread_local! {
    /// Whether this thread panicked since the flag was last cleared, caught or not.
    static PANICKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` and says whether it panicked on the way, even where the panic was caught: brush's
/// panics are caught and reported as unparsable, but under a fuzzer's panic hook a caught panic
/// is still a crash, so the screens must keep brush from panicking at all.
fn panicked_in<T>(f: impl FnOnce() -> T) -> (T, bool) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.with(|p| p.set(true));
            previous(info);
        }));
    });
    PANICKED.with(|p| p.set(false));
    let value = f();
    (value, PANICKED.with(std::cell::Cell::get))
}

/// A word of digits before a redirection is a file descriptor number to brush, which panics on
/// one that does not fit (found by the fuzzer through the guard rails' reading); both screens
/// refuse it first.
#[test]
fn a_file_descriptor_number_out_of_range_is_refused_before_brush_reads_it() {
    let place = policy::shell::Place {
        cwd: std::path::Path::new("/work/proj"),
        home: None,
        granted: &[],
    };
    for script in [
        "echo hi 99999999999>out",
        "ls 2147483648<in",
        "<>2;6666666666666<>\u{12}<",
    ] {
        let (verdict, panicked) = panicked_in(|| covers_script(script, &grants()));
        assert!(!panicked, "brush panicked on {script:?}");
        assert!(verdict.is_err(), "{script:?}");
        let (rail, panicked) = panicked_in(|| policy::shell::catastrophic(script, &place));
        assert!(!panicked, "brush panicked on {script:?} in the rails");
        assert_eq!(rail, None, "{script:?}");
    }
    // Where the box enforces paths a redirection can be covered, and the refusal names the
    // number; a number that fits is a redirection as before.
    let enforced = |script: &str| {
        policy::shell::covers_script_in(
            script,
            &grants(),
            policy::shell::Dialect::Bash,
            policy::shell::PathEnforcement::Enforced,
        )
    };
    match enforced("echo hi 99999999999>out") {
        Err(NotCovered::Unparsable(detail)) => {
            assert!(
                detail.contains("99999999999") && detail.contains("out of range"),
                "{detail}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(enforced("echo hi 2147483647>out"), Ok(()));
}

/// Checks every row and reports all the rows that differ at once.
fn check_table(rows: &[(&str, V)]) {
    let wrong: Vec<String> = rows
        .iter()
        .filter_map(|&(script, want)| {
            let got = verdict(script);
            (got != want).then(|| {
                format!(
                    "{script:?}: want {want:?}, got {got:?} ({:?})",
                    covers_script(script, &grants())
                )
            })
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} rows differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| (*w).to_owned()).collect()
}

use V::*;

#[test]
fn a_simple_command_is_covered_only_by_a_whole_prefix_word_by_word() {
    check_table(&[
        ("git status", Covered),
        ("git status -s", Covered),
        ("git status --porcelain=v2 src/", Covered),
        ("git log --oneline -n 5", Covered),
        ("ls", Covered),
        ("ls -la /etc", Covered),
        ("wc -l Cargo.toml", Covered),
        ("cargo test -p brokerd --test shell_coverage", Covered),
        ("git stat", NoPrefix),
        ("git", NoPrefix),
        ("gitk status", NoPrefix),
        ("git push", NoPrefix),
        ("wc -c Cargo.toml", NoPrefix),
        ("wc", NoPrefix),
        ("cargo", NoPrefix),
        ("cargo build", NoPrefix),
        ("/usr/bin/git status", NoPrefix),
        ("rm -rf /", NoPrefix),
        ("git -C /tmp status", NoPrefix),
        ("   git status   ", Covered),
        ("git status\n", Covered),
    ]);
}

#[test]
fn a_pipeline_is_covered_only_when_every_command_is() {
    check_table(&[
        ("git log | grep fix", Covered),
        ("git status && ls -la | grep foo", Covered),
        ("ls | wc -l", Covered),
        ("ls | grep a | grep b | wc -l", Covered),
        ("ls | sh", NoPrefix),
        ("git log | tee out.txt", NoPrefix),
        ("ls | xargs rm", NoPrefix),
        ("! git status", Covered),
        ("time git status", Covered),
        ("time -p ls", Covered),
        ("!", Unsupported),
    ]);
}

#[test]
fn lists_are_covered_only_when_every_command_is() {
    check_table(&[
        ("git status; ls", Covered),
        ("git status && ls", Covered),
        ("git status || echo failed", Covered),
        ("git status\nls\ngit log", Covered),
        ("git status; rm -rf /", NoPrefix),
        ("git status && rm -rf /", NoPrefix),
        ("git status || rm -rf /", NoPrefix),
        ("ls\nrm -rf /", NoPrefix),
        ("git status;", Covered),
        ("git status ;; ls", Unparsable),
    ]);
}

#[test]
fn subshells_and_brace_groups_are_looked_into() {
    check_table(&[
        ("(git status)", Covered),
        ("( ls; git log )", Covered),
        ("{ ls; git log; }", Covered),
        ("(ls) && { echo done; }", Covered),
        ("( ls; ( echo nested ) )", Covered),
        ("(rm -rf /)", NoPrefix),
        ("{ ls; rm x; }", NoPrefix),
        ("((ls))", Unsupported),
        ("( (ls) )", Unsupported),
        ("{ ls; } > out", Redirection),
        ("(ls", Unparsable),
    ]);
}

#[test]
fn sh_c_with_a_literal_script_is_checked_recursively() {
    check_table(&[
        ("sh -c 'git status'", Covered),
        ("bash -c \"ls && git log\"", Covered),
        ("dash -c 'ls | wc -l'", Covered),
        ("/bin/sh -c 'ls'", Covered),
        ("sh -c 'ls' name arg1 arg2", Covered),
        ("sh -c \"sh -c 'git status'\"", Covered),
        ("bash -c 'sh -c \"bash -c ls\"'", Covered),
        ("sh -c 'rm -rf /'", NoPrefix),
        ("bash -c \"ls; rm -rf /\"", NoPrefix),
        ("sh -c \"sh -c 'rm -rf /'\"", NoPrefix),
        ("sh -c \"$X\"", Substitution),
        ("sh -c $X", Substitution),
        ("sh -c 'echo $HOME'", Substitution),
        ("sh -c ''", Empty),
        ("sh -c '# nothing'", Empty),
        ("sh -c", NoPrefix),
        ("sh -e -c 'ls'", NoPrefix),
        ("bash -lc 'ls'", NoPrefix),
        ("zsh -c 'ls'", NoPrefix),
        ("sh -c $'ls'", Unsupported),
        ("sh -c 'ls &'", Background),
        ("sh -c 'ls > x'", Redirection),
    ]);
}

#[test]
fn sh_c_nesting_stops_at_the_depth_limit() {
    // Each level quotes the one inside it for the shell.
    fn nest(levels: usize) -> String {
        let mut script = "ls".to_owned();
        for _ in 0..levels {
            script = format!("sh -c '{}'", script.replace('\'', r"'\''"));
        }
        script
    }
    assert_eq!(verdict(&nest(4)), Covered);
    assert_eq!(verdict(&nest(5)), TooDeep);
    assert_eq!(verdict(&nest(8)), TooDeep);
}

#[test]
fn any_substitution_makes_a_script_not_covered() {
    check_table(&[
        ("echo $(rm -rf /)", Substitution),
        ("echo `rm -rf /`", Substitution),
        ("echo $X", Substitution),
        ("echo ${X}", Substitution),
        ("echo ${X:-default}", Substitution),
        ("echo \"$X\"", Substitution),
        ("echo \"hello $USER\"", Substitution),
        ("echo $((1 + 2))", Substitution),
        ("echo $?", Substitution),
        ("echo a$", Substitution),
        ("$CMD status", Substitution),
        ("git $SUB", Substitution),
        ("git status $(rm -rf /)", Substitution),
        ("echo $\"translated\"", Substitution),
        ("grep x <(ls)", Substitution),
        ("ls >(cat)", Substitution),
        ("echo '$HOME' '`x`' '$(x)'", Covered),
        ("echo \\$HOME", Covered),
        ("echo \"\\$HOME\"", Covered),
    ]);
}

#[test]
fn assignments_are_not_covered() {
    check_table(&[
        ("PATH=/tmp git status", Assignment),
        ("GIT_DIR=/x git log", Assignment),
        ("X=1", Assignment),
        ("X=1; git status", Assignment),
        ("a+=1 ls", Assignment),
        ("a[0]=1 ls", Assignment),
        ("a=(1 2) ls", Assignment),
        ("git status X=1", Covered),
        ("echo --define=1", Covered),
        ("'X=1' git status", NoPrefix),
    ]);
}

#[test]
fn function_definitions_and_code_running_builtins_are_never_covered() {
    check_table(&[
        ("git() { rm -rf /; }; git status", FunctionDefinition),
        ("function git { ls; }", FunctionDefinition),
        ("f() ( ls )", FunctionDefinition),
        ("eval 'git status'", Builtin),
        ("eval ls", Builtin),
        ("source ./script.sh", Builtin),
        (". ./script.sh", Builtin),
        ("exec ls", Builtin),
        ("\\eval ls", Builtin),
        ("'exec' ls", Builtin),
        ("ls && eval x", Builtin),
        ("alias git=rm", Builtin),
        ("set -k", Builtin),
        ("export PATH=/tmp", Builtin),
        ("declare -x PATH=/tmp", Builtin),
        ("trap 'rm -rf /' EXIT", Builtin),
        ("hash -p /bin/rm git", Builtin),
        ("coproc ls", Builtin),
    ]);
}

#[test]
fn builtins_that_evaluate_their_arguments_are_refused_even_when_granted() {
    let granted =
        |list: &[&[&str]]| -> Vec<Vec<String>> { list.iter().map(|p| words(p)).collect() };
    let prefixes = granted(&[&["printf"], &["test"], &["["], &["eval"], &["wait"]]);
    assert_eq!(verdict_with("printf '%s\\n' hello", &prefixes), Covered);
    assert_eq!(verdict_with("printf -v PATH /tmp", &prefixes), Builtin);
    assert_eq!(verdict_with("printf -vPATH /tmp", &prefixes), Builtin);
    assert_eq!(verdict_with("test -f Cargo.toml", &prefixes), Covered);
    assert_eq!(verdict_with("test -v 'a[$(id)]'", &prefixes), Builtin);
    assert_eq!(verdict_with("[ -f Cargo.toml ]", &prefixes), Covered);
    assert_eq!(verdict_with("[ -v x ]", &prefixes), Builtin);
    assert_eq!(verdict_with("eval ls", &prefixes), Builtin);
    assert_eq!(verdict_with("wait", &prefixes), Covered);
    assert_eq!(verdict_with("wait -p pid", &prefixes), Builtin);
}

#[test]
fn redirections_of_any_kind_are_not_covered_until_the_sandbox_enforces_paths() {
    check_table(&[
        ("ls > out.txt", Redirection),
        ("ls >> out.txt", Redirection),
        ("grep x < in.txt", Redirection),
        ("ls 2>&1", Redirection),
        ("ls 2>/dev/null", Redirection),
        ("ls &> out", Redirection),
        ("ls >| out", Redirection),
        ("grep x <> f", Redirection),
        ("ls |& grep x", Redirection),
        ("> out ls", Redirection),
        ("grep x <<EOF\nhello\nEOF", Redirection),
        ("grep x <<-'EOF'\n\thello\n\tEOF", Redirection),
        ("grep x <<< hello", Redirection),
        ("ls 99999999999999999999>x", Redirection),
        ("ls '>' out", Covered),
        ("echo a\\>b", Covered),
    ]);
}

#[test]
fn a_background_ampersand_anywhere_is_not_covered() {
    check_table(&[
        ("ls &", Background),
        ("ls & git status", Background),
        ("(ls &)", Background),
        ("{ ls & }", Background),
        ("rm -rf / &", Background),
        ("ls && git status", Covered),
        ("echo '&'", Covered),
        ("echo a\\&b", Covered),
    ]);
}

#[test]
fn control_flow_is_not_followed() {
    check_table(&[
        ("if true; then ls; fi", ControlFlow),
        ("if git status; then ls; fi", ControlFlow),
        ("while true; do ls; done", ControlFlow),
        ("until false; do ls; done", ControlFlow),
        ("for f in a b; do echo $f; done", ControlFlow),
        ("for ((i=0;i<3;i++)); do ls; done", ControlFlow),
        ("case x in x) ls;; esac", ControlFlow),
        ("select x in a b; do ls; done", ControlFlow),
        ("ls && if true; then ls; fi", ControlFlow),
        ("[[ -f x ]]", Unsupported),
        ("[[ -f x ]] && ls", Unsupported),
        ("((1 + 2))", Unsupported),
        ("echo if then fi", Covered),
        ("echo for while case", Covered),
        ("'if' true", NoPrefix),
    ]);
}

#[test]
fn glob_and_brace_characters_are_refused_unless_quoted() {
    check_table(&[
        ("gi* status", Glob),
        ("g?t status", Glob),
        ("gi[t] status", Glob),
        ("{git,rm} status", Glob),
        ("git {status,push}", Glob),
        ("ls *.rs", Glob),
        ("ls src/?.rs", Glob),
        ("ls [ab].rs", Glob),
        ("echo {1..3}", Glob),
        ("echo a{b,c}d", Glob),
        ("ls '*.rs'", Covered),
        ("ls \"*.rs\"", Covered),
        ("ls \\*.rs", Covered),
        ("grep -E 'a[bc]?d*' file", Covered),
        ("echo {}", Covered),
        ("git log @{u}", Covered),
        ("echo '{a,b}'", Covered),
        ("echo [", Covered),
        ("echo ]", Covered),
        ("echo a]b", Covered),
    ]);
}

#[test]
fn a_quoted_star_is_compared_literally_with_a_prefix_word() {
    let prefixes = vec![words(&["tool", "*"])];
    assert_eq!(verdict_with("tool '*'", &prefixes), Covered);
    assert_eq!(verdict_with("tool \"*\" more", &prefixes), Covered);
    assert_eq!(verdict_with("tool \\*", &prefixes), Covered);
    assert_eq!(verdict_with("tool *", &prefixes), Glob);
    assert_eq!(verdict_with("tool x", &prefixes), NoPrefix);
}

#[test]
fn quoting_is_resolved_exactly_as_the_shell_does() {
    check_table(&[
        ("'git' status", Covered),
        ("\"git\" \"status\"", Covered),
        ("g'i't status", Covered),
        ("g''it status", Covered),
        ("g\"\"it st'a'tus", Covered),
        ("\\git status", Covered),
        ("git \\status", Covered),
        ("gi\\\nt status", Covered),
        ("git\\ status", NoPrefix),
        ("'git status'", NoPrefix),
        ("\"git status\"", NoPrefix),
        ("'git\n' status", NoPrefix),
        ("echo 'multi\nline' \"and\nmore\"", Covered),
        ("$'git' status", Unsupported),
        ("git $'status'", Unsupported),
        ("echo $'a\\nb'", Covered),
        ("echo $'it\\'s'", Covered),
        ("echo \\$'\\' ; rm -rf / #'", Unparsable),
        ("echo 'unterminated", Unparsable),
        ("echo \"unterminated", Unparsable),
        ("echo trailing\\", Unparsable),
        ("git status # rm -rf /", Covered),
        ("echo a#b", Covered),
        ("ls ~", Covered),
        ("ls ~/src", Covered),
        ("~/bin/git status", Unsupported),
        ("git status\r", NoPrefix),
    ]);
}

#[test]
fn an_empty_script_or_only_comments_is_not_covered() {
    check_table(&[
        ("", Empty),
        ("   ", Empty),
        ("\n\n", Empty),
        ("# just a comment", Empty),
        ("# one\n# two\n", Empty),
        ("\\\n", Empty),
    ]);
}

#[test]
fn unicode_words_are_compared_as_they_are() {
    let prefixes = vec![words(&["outil", "données"]), words(&["echo"])];
    assert_eq!(verdict_with("outil données --été", &prefixes), Covered);
    assert_eq!(verdict_with("outil 'données'", &prefixes), Covered);
    assert_eq!(verdict_with("outil donnees", &prefixes), NoPrefix);
    assert_eq!(verdict_with("echo 日本語 🦀", &prefixes), Covered);
    // A no-break space is not a blank for the shell: it stays inside the word.
    assert_eq!(verdict_with("outil\u{a0}données", &prefixes), NoPrefix);
    assert_eq!(verdict_with("echo a\0b", &prefixes), Unparsable);
}

#[test]
fn a_long_script_is_checked_whole_and_a_too_long_one_is_refused() {
    let line = "git status && ls -la | grep foo\n";
    let long = line.repeat(1000);
    assert_eq!(verdict(&long), Covered);
    let mut poisoned = long.clone();
    poisoned.push_str("rm -rf /\n");
    poisoned.push_str(&long);
    assert_eq!(verdict(&poisoned), NoPrefix);
    let too_long = line.repeat(MAX_SCRIPT_BYTES / line.len() + 1);
    assert_eq!(
        covers_script(&too_long, &grants()),
        Err(NotCovered::TooLong(too_long.len()))
    );
    let one_long_word = format!("echo {}", "a".repeat(60_000));
    assert_eq!(verdict(&one_long_word), Covered);
}

#[test]
fn deep_nesting_is_refused_before_the_parser_runs() {
    assert_eq!(
        verdict(&format!("{}ls{}", "( ".repeat(40), " )".repeat(40))),
        Unsupported
    );
    assert_eq!(
        verdict(&format!("{}ls{}", "( ls; ".repeat(40), " )".repeat(40))),
        TooDeep
    );
    assert_eq!(
        verdict(&format!("{}ls{}", "{ ".repeat(40), "; }".repeat(40))),
        TooDeep
    );
    assert_eq!(
        verdict(&format!("{}ls{}", "( ls; ".repeat(8), " )".repeat(8))),
        Covered
    );
    assert_eq!(
        verdict(&format!("{}ls{}", "{ ".repeat(8), "; }".repeat(8))),
        Covered
    );
    let deepest = format!("{}ls{}", "( ls; { ".repeat(8), "; } )".repeat(8));
    assert_eq!(verdict(&deepest), Covered);
    assert_eq!(
        verdict(&format!("echo {}x{}", "$(".repeat(30), ")".repeat(30))),
        Substitution
    );
    // Shapes on which the parser backtracks exponentially when it is given them unchecked.
    assert_eq!(verdict(&"(".repeat(10_000)), Unsupported);
    assert_eq!(verdict(&"( ls; ".repeat(10_000)), TooDeep);
    assert_eq!(verdict(&"case x in x) ".repeat(4_000)), ControlFlow);
    assert_eq!(verdict(&"{ ".repeat(10_000)), TooDeep);
    assert_eq!(verdict(&format!("echo {}", "$(".repeat(10_000))), TooDeep);
    assert_eq!(verdict(&format!("echo '{}'", "$(x)".repeat(100))), TooDeep);
}

#[test]
fn reasons_name_the_command_or_construct() {
    let reason = |script: &str| covers_script(script, &grants()).map_err(|e| e.to_string());
    assert_eq!(
        reason("git status && rm -rf /"),
        Err("no granted prefix covers the command `rm -rf /`".into())
    );
    assert_eq!(
        covers_script("echo $(id)", &grants()),
        Err(NotCovered::Substitution("$(id)".into()))
    );
    assert_eq!(
        covers_script("PATH=/tmp git status", &grants()),
        Err(NotCovered::Assignment("PATH=/tmp".into()))
    );
    assert_eq!(
        covers_script("ls 2>&1", &grants()),
        Err(NotCovered::Redirection("2>&1".into()))
    );
    assert_eq!(
        covers_script("ls > out.txt", &grants()),
        Err(NotCovered::Redirection(">out.txt".into()))
    );
    assert_eq!(
        covers_script("eval ls", &grants()),
        Err(NotCovered::Builtin("eval".into()))
    );
    assert_eq!(
        covers_script("ls *.rs", &grants()),
        Err(NotCovered::Glob("*.rs".into()))
    );
    assert_eq!(
        covers_script("git() { ls; }", &grants()),
        Err(NotCovered::FunctionDefinition("git".into()))
    );
    assert_eq!(
        covers_script("while true; do ls; done", &grants()),
        Err(NotCovered::ControlFlow("while".into()))
    );
    assert_eq!(
        reason("echo 'it'\\''s' | tee 'my file'"),
        Err("no granted prefix covers the command `tee 'my file'`".into())
    );
    for error in [
        NotCovered::Unparsable("x".into()),
        NotCovered::TooLong(1),
        NotCovered::Background,
        NotCovered::Unsupported("x".into()),
        NotCovered::TooDeep,
        NotCovered::Empty,
    ] {
        let sentence = error.to_string();
        assert!(
            !sentence.is_empty() && !sentence.ends_with('.'),
            "{sentence}"
        );
        assert!(!sentence.contains('\n'), "{sentence}");
    }
    let long = format!("rm {}", "x".repeat(1000));
    let sentence = reason(&long).err().unwrap_or_default();
    assert!(sentence.chars().count() < 200, "{sentence}");
}

#[test]
fn an_empty_prefix_covers_nothing() {
    assert_eq!(verdict_with("ls", &[vec![]]), NoPrefix);
    assert_eq!(verdict_with("ls", &[]), NoPrefix);
    assert_eq!(verdict_with("ls", &[vec![], words(&["ls"])]), Covered);
}

#[test]
fn a_prefix_string_is_split_with_shell_quoting() {
    assert_eq!(prefix_words("git status"), Ok(words(&["git", "status"])));
    assert_eq!(
        prefix_words("  git   status  "),
        Ok(words(&["git", "status"]))
    );
    assert_eq!(
        prefix_words("'my tool' run"),
        Ok(words(&["my tool", "run"]))
    );
    assert_eq!(
        prefix_words("\"my tool\" run"),
        Ok(words(&["my tool", "run"]))
    );
    assert_eq!(
        prefix_words("my\\ tool run"),
        Ok(words(&["my tool", "run"]))
    );
    assert_eq!(prefix_words("tool '*'"), Ok(words(&["tool", "*"])));
    assert_eq!(prefix_words("wc -l"), Ok(words(&["wc", "-l"])));
    assert_eq!(prefix_words("g'i't"), Ok(words(&["git"])));
    for (bad, why) in [
        ("", "the prefix is empty"),
        ("   ", "the prefix is empty"),
        ("'unterminated", "unterminated quote"),
        ("\"unterminated", "unterminated quote"),
        ("trailing\\", "lone backslash"),
        ("git $X", "`$X` asks for a substitution"),
        ("git `x`", "``x`` asks for a substitution"),
        ("ls *.rs", "`*.rs` has glob or brace characters"),
        ("git {a,b}", "`{a,b}` has glob or brace characters"),
        ("ls; rm", "has an unquoted `;`"),
        ("ls | wc", "has an unquoted `|`"),
        ("ls > x", "has an unquoted `>`"),
        ("~/bin/tool", "`~/bin/tool` uses `~` or `$'…'`"),
        ("$'x'", "`$'x'` uses `~` or `$'…'`"),
        ("''", "an empty word"),
        ("# comment", "would start a comment"),
        ("PATH=/tmp git", "`PATH=/tmp` is a variable assignment"),
    ] {
        let result = prefix_words(bad);
        assert!(
            result.as_ref().is_err_and(|e| e.contains(why)),
            "{bad:?} gave {result:?}, not {why:?}"
        );
    }
    // A prefix split by prefix_words covers the script that quotes it the same way.
    let prefix = prefix_words("'my tool' run").unwrap_or_default();
    assert_eq!(verdict_with("\"my tool\" run --fast", &[prefix]), Covered);
}

#[test]
fn prefixes_that_run_other_programs_get_a_warning() {
    let warn = |p: &[&str]| prefix_warning(&words(p));
    for runs_others in [
        &["env"][..],
        &["xargs"],
        &["find", "."],
        &["git"],
        &["git", "-c", "core.pager=x"],
        &["git", "rebase"],
        &["git", "submodule"],
        &["sudo", "ls"],
        &["doas", "ls"],
        &["nice"],
        &["nohup"],
        &["timeout", "10"],
        &["watch"],
        &["sh"],
        &["bash", "-c"],
        &["zsh"],
        &["dash"],
        &["python3", "-m", "pytest"],
        &["/usr/bin/python3.12"],
        &["perl"],
        &["ruby"],
        &["node"],
        &["awk"],
        &["sed"],
        &["sed", "-e"],
        &["make"],
        &["cargo", "test"],
        &["npm", "test"],
        &["ssh"],
        &["rsync"],
        &["tar"],
        &["rg"],
    ] {
        let warning = warn(runs_others);
        assert!(warning.is_some(), "{runs_others:?} gave no warning");
    }
    for narrow in [
        &["ls"][..],
        &["grep"],
        &["wc", "-l"],
        &["echo"],
        &["cat"],
        &["git", "status"],
        &["git", "rev-parse"],
        &["sed", "--sandbox"],
        &["sed", "-n", "--sandbox"],
    ] {
        assert_eq!(warn(narrow), None, "{narrow:?}");
    }
    let never = warn(&["eval"]).unwrap_or_default();
    assert!(never.contains("never covered"), "{never}");
    assert!(warn(&["if"]).is_some());
    assert!(warn(&[]).is_some());
    let find = warn(&["find"]).unwrap_or_default();
    assert!(find.contains("-exec"), "{find}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn covers_script_never_panics_on_any_string(script in any::<String>()) {
        let _ = covers_script(&script, &grants());
        // Any reason will do: random text is refused for whatever it holds, and the property is
        // only that nothing is covered without a grant.
        prop_assert!(covers_script(&script, &[]).is_err());
    }

    #[test]
    fn covers_script_never_panics_on_shell_like_text(
        script in proptest::collection::vec(
            prop_oneof![
                Just("git"), Just("status"), Just("ls"), Just(" "), Just("\n"), Just(";"),
                Just("&&"), Just("||"), Just("|"), Just("&"), Just("("), Just(")"), Just("{"),
                Just("}"), Just("'"), Just("\""), Just("\\"), Just("$"), Just("`"), Just("$("),
                Just("${"), Just("$'"), Just("<"), Just(">"), Just("<<"), Just("#"), Just("*"),
                Just("?"), Just("["), Just("]"), Just(","), Just("~"), Just("="), Just("!"),
                Just("if"), Just("then"), Just("fi"), Just("case"), Just("in"), Just("esac"),
                Just("sh -c "), Just("9999999999"), Just("time"), Just("function"), Just("[["),
            ],
            0..40,
        )
    ) {
        let script: String = script.concat();
        let (_, panicked) = panicked_in(|| covers_script(&script, &grants()));
        prop_assert!(!panicked, "brush panicked on {:?}", script);
        // Any reason will do (the pieces make every refusal likely); the property is only that
        // nothing is covered without a grant.
        prop_assert!(covers_script(&script, &[]).is_err(), "covered without grants: {:?}", script);
    }

    #[test]
    fn prefix_words_never_panics(text in any::<String>()) {
        let _ = prefix_words(&text);
    }

    #[test]
    fn a_covered_script_stays_covered_when_quoted_plainly(word in "[a-z][a-z0-9_-]{0,8}") {
        let prefixes = vec![vec![word.clone()]];
        // Words refused whatever the grants say (`fc`, `eval`, `set`, keywords) are not covered
        // bare either; the property is about the words that are.
        prop_assume!(covers_script(&format!("{word} --flag"), &prefixes) == Ok(()));
        prop_assert_eq!(covers_script(&format!("'{word}' --flag"), &prefixes), Ok(()));
        prop_assert_eq!(covers_script(&format!("\"{word}\""), &prefixes), Ok(()));
        let split = prefix_words(&format!("'{word}'"));
        prop_assert_eq!(split, Ok(vec![word]));
    }
}

#[test]
fn touches_script_finds_any_command_that_starts_with_a_prefix() {
    use policy::shell::touches_script;
    let push = vec![vec!["git".to_string(), "push".to_string()]];
    assert!(touches_script("git push", &push));
    assert!(touches_script("ls; git push origin main", &push));
    assert!(touches_script("true && (git push)", &push));
    assert!(touches_script("sh -c 'bash -c \"git push\"'", &push));
    assert!(touches_script("git --no-pager push", &push));
    assert!(touches_script("git -C /repo push origin", &push));
    assert!(touches_script("/usr/bin/git push", &push));
    assert!(!touches_script("git status; git log", &push));
    assert!(!touches_script("echo git push", &push));
    assert!(
        !touches_script("git push > out", &push),
        "a script not understood touches nothing"
    );
}
