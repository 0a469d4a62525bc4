//! Redirections where the box enforces paths (`PathEnforcement::Enforced`): covered, each file one
//! more place the decision checks; where it does not (`PathEnforcement::Unenforced`, what
//! `covers_script` and `write_targets` use), every one refused as before.

use policy::shell::{
    Dialect, NotCovered, PathEnforcement, WriteTarget, covers_script_in, touches_script_in,
    write_targets_in,
};

fn prefixes(words: &[&[&str]]) -> Vec<Vec<String>> {
    words
        .iter()
        .map(|p| p.iter().map(|w| (*w).to_owned()).collect())
        .collect()
}

fn covered(script: &str, walls: PathEnforcement) -> Result<(), NotCovered> {
    covers_script_in(
        script,
        &prefixes(&[&["ls"], &["grep"], &["cat"]]),
        Dialect::Bash,
        walls,
    )
}

fn targets(script: &str) -> Vec<String> {
    write_targets_in(script, Dialect::Bash, PathEnforcement::Enforced)
        .unwrap()
        .into_iter()
        .map(|t| match t {
            WriteTarget::Path(p) => p,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn with_the_box_enforcing_paths_redirections_to_named_files_are_covered() {
    for script in [
        "ls > out.txt",
        "ls >> out.txt",
        "grep x < in.txt",
        "ls 2>&1",
        "ls 2>/dev/null",
        "ls &> out",
        "ls >| out",
        "grep x <> f",
        "ls |& grep x",
        "> out ls",
        "{ ls; } > out",
        "ls >&2",
        "ls 3>&-",
        "sh -c 'ls > x'",
    ] {
        assert_eq!(
            covered(script, PathEnforcement::Enforced),
            Ok(()),
            "{script}"
        );
        assert!(
            matches!(
                covered(script, PathEnforcement::Unenforced),
                Err(NotCovered::Redirection(_))
            ),
            "{script}"
        );
    }
}

#[test]
fn with_the_box_enforcing_paths_heredocs_and_process_substitution_stay_refused() {
    for script in [
        "grep x <<EOF\nhello\nEOF",
        "grep x <<< hello",
        "cat < <(ls)",
        "ls > >(cat)",
    ] {
        let result = covered(script, PathEnforcement::Enforced);
        assert!(
            matches!(
                result,
                Err(NotCovered::Redirection(_) | NotCovered::Substitution(_))
            ),
            "{script}: {result:?}"
        );
    }
    assert!(matches!(
        covered("ls > \"$HOME/x\"", PathEnforcement::Enforced),
        Err(NotCovered::Substitution(_))
    ));
    assert!(matches!(
        covered("ls > *.txt", PathEnforcement::Enforced),
        Err(NotCovered::Glob(_))
    ));
    // A redirection does not hide a command no prefix covers.
    assert!(matches!(
        covered("ls > out; rm -rf x", PathEnforcement::Enforced),
        Err(NotCovered::NoPrefix(_))
    ));
}

#[test]
fn a_redirections_file_is_a_place_the_script_writes_under_its_folders() {
    assert_eq!(targets("ls > out.txt"), ["out.txt"]);
    assert_eq!(targets("grep x < in.txt >> log"), ["in.txt", "log"]);
    assert_eq!(targets("ls &> both; ls >&file"), ["both", "file"]);
    assert_eq!(targets("ls 2>&1 >&2 3>&-"), Vec::<String>::new());
    assert_eq!(targets("ls 2>/dev/null"), Vec::<String>::new());
    assert_eq!(targets("{ ls; } > /abs/out"), ["/abs/out"]);
    assert_eq!(targets("cd sub && ls > out"), ["out", "sub/out"]);
    assert_eq!(targets("sh -c 'ls > inner'"), ["inner"]);
    // Without the box, the redirection is refused whatever it names.
    assert!(matches!(
        write_targets_in("ls > out", Dialect::Bash, PathEnforcement::Unenforced),
        Err(NotCovered::Redirection(_))
    ));
}

#[test]
fn a_deny_grant_still_sees_a_command_behind_a_redirection() {
    let deny = prefixes(&[&["git", "push"]]);
    assert!(touches_script_in(
        "git push > out",
        &deny,
        Dialect::Bash,
        PathEnforcement::Enforced
    ));
}
