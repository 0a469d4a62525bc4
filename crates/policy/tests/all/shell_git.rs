//! git under allow and deny grants: the options that change git's repository, configuration or
//! programs are never covered, and a deny on a subcommand wins whenever the subcommand that runs
//! cannot be known for certain (aliases, `-c`, wrappers, shells).

use policy::shell::{NotCovered, covers_script, touches_script};

use testkit::prefixes;

#[test]
fn a_git_option_that_changes_its_repository_configuration_or_programs_is_not_covered() {
    let git = prefixes(&["git", "/usr/bin/git"]);
    for script in [
        "git --git-dir=/g/.git status",
        "git --git-dir /g/.git log",
        "git --work-tree=/ status",
        "git --work-tree / status",
        "git -c core.pager=x log",
        "git -c alias.st=status st",
        "git --config-env=core.pager=X log",
        "git --config-env core.pager=X log",
        "git --exec-path=/tmp log",
        "git --exec-path log",
        "git --shallow-file=x log",
        "git --bogus status",
        "git -C . -c a=b status",
        "/usr/bin/git -c core.fsmonitor=x status",
        "git status && git -c x=y log",
        "sh -c 'git --git-dir=x log'",
        "git clone -c core.fsmonitor=x a b",
        "git clone --config core.fsmonitor=x a b",
        "git clone -u 'touch x' a b",
        "git clone --upload-pack='touch x' a b",
        "git clone --template=/g/t a b",
        "git fetch --upload-pack=x origin",
        "git ls-remote --upl=x origin",
        "git push --receive-pack=x origin",
        "git archive --exec=x --remote=. HEAD",
        "git rebase -x 'touch x' main",
        "git rebase --exec='touch x' main",
        "git rebase -ix x main",
        "git grep -O'touch x' y",
        "git grep --open-files-in-pager=x y",
        "git init --template=/g/t x",
        "git merge -s evil main",
        "git merge --strategy=evil main",
        "git pull -sevil",
        "git rebase --strat evil main",
    ] {
        assert!(
            matches!(covers_script(script, &git), Err(NotCovered::GitOption(_))),
            "{script:?}: {:?}",
            covers_script(script, &git)
        );
    }
    assert_eq!(
        covers_script("GIT_DIR=/x git log", &git),
        Err(NotCovered::Assignment("GIT_DIR=/x".into()))
    );
    for script in [
        "git status",
        "git -C /g status",
        "git --no-pager log",
        "git -P log -p",
        "git --namespace=x log",
        "git --bare log",
        "git log -c",
        "git switch -c feature",
        "git grep -c foo",
        "git --version",
        "git --help",
        "git log -- --git-dir",
        "git clone --depth 1 https://e.example/r d",
        "git rebase -i main",
        "git rebase --onto main x",
        "git grep -n foo",
        "git fetch --unshallow origin",
        "git merge -s ours main",
        "git merge --strategy=ort -X theirs main",
        "git merge --squash main",
        "git cherry-pick -s abc",
    ] {
        assert_eq!(covers_script(script, &git), Ok(()), "{script:?}");
    }
}

/// Under a deny of `git push` (and an allow of `git`), these may push.
const MAY_PUSH: &[&str] = &[
    "git push",
    "git --no-pager push",
    "git -C /repo push origin",
    "/usr/bin/git push",
    "git -c alias.p=push p",
    "git config alias.p '!git push' && git p",
    "git p",
    "git pu",
    "git st",
    "git --exec-path=/x status",
    "git -c x=y status",
    "git --config-env=a=B status",
    "git --git-dir=.git status",
    "git --work-tree=. status",
    "git config --global alias.p push",
    "git config set alias.p push",
    "git config --add alias.p push",
    "git config ALIAS.P push",
    "git config Alias.p push",
    "git config --file x alias.p push",
    "git config --rename-section foo alias",
    "git config --remove-section alias",
    "git config --edit",
    "git config -e",
    "git config edit",
    "git config core.editor 'git push #'",
    "git config core.sshCommand x",
    "git config include.path x",
    "git config includeIf.onbranch:main.path x",
    "git config --bogus",
    "git send-pack origin main",
    "git http-push x",
    "git-push origin",
    "/usr/lib/git-core/git-push origin",
    "git submodule foreach 'git push'",
    "git submodule update",
    "git rebase -x 'git push' main",
    "git rebase --exec='git push' main",
    "git rebase --ex x main",
    "git rebase -i main",
    "git rebase -ix x",
    "git grep -O'git push' x",
    "git grep --open-files-in-pager=x y",
    "git clone -u 'x' a b",
    "git clone --upload-pack=x a b",
    "git clone -c core.sshCommand=x a b",
    "git fetch --upload-pack=x",
    "git ls-remote --upload-p=x o",
    "git bisect run git push",
    "git difftool",
    "git mergetool",
    "git filter-branch --tree-filter x",
    "git for-each-repo --config=x p",
    "git hook run pre-push",
    "git merge -s push main",
    "env git push",
    "env GIT_X=1 git p",
    "env GIT_EXEC_PATH=/g git pull",
    "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.editor GIT_CONFIG_VALUE_0=x git commit",
    "command git push",
    "command -p git push",
    "nice -n 5 git push",
    "timeout 5 git push",
    "time git push",
    "sudo git push",
    "sudo -u me git push",
    "nohup git push",
    "stdbuf -oL git push",
    "xargs git push",
    "echo push | xargs git",
    "find . -exec git {} ;",
    "sh -c 'git push'",
    "bash -lc 'git push'",
    "bash -c -- 'git push'",
    "sh -e -c 'git push'",
    "env sh -c 'git push'",
    "sudo sh -c 'git push'",
    "xargs sh -c 'git push'",
    "sh -c \"sh -c 'git push'\"",
    "sh -c 'git pu\"\"sh'",
    "sh -c 'git push > /dev/null'",
    "sh -c 'x=push; git $x'",
    "bash script.sh",
    "ls | sh",
    "python3 -c \"import os; os.system('git push')\"",
    "perl -e 'system(\"git\", \"push\")'",
];

/// Under the same deny, these cannot push.
const CANNOT_PUSH: &[&str] = &[
    "git status",
    "git log --oneline",
    "git commit -m 'fix the push button'",
    "git config user.name 'A B'",
    "git config --global user.email a@b",
    "git config --get alias.p",
    "git config --list",
    "git config alias.p",
    "git config get alias.p",
    "git switch -c x",
    "git log -c",
    "git rebase main",
    "git grep foo",
    "git --version",
    "env git status",
    "nice git log",
    "echo git push",
    "ls",
    "sh -c 'git status'",
];

#[test]
fn a_deny_on_a_git_subcommand_wins_when_the_subcommand_cannot_be_known() {
    let push = prefixes(&["git push"]);
    let missed: Vec<&&str> = MAY_PUSH
        .iter()
        .filter(|script| !touches_script(script, &push))
        .collect();
    assert!(missed.is_empty(), "not touched: {missed:#?}");
    let refused: Vec<&&str> = CANNOT_PUSH
        .iter()
        .filter(|script| touches_script(script, &push))
        .collect();
    assert!(refused.is_empty(), "touched: {refused:#?}");
}

#[test]
fn a_deny_on_another_subcommand_is_matched_the_same_way() {
    let fetch = prefixes(&["git fetch"]);
    assert!(touches_script("git pull", &fetch));
    assert!(touches_script("git fetch-pack x", &fetch));
    assert!(touches_script("git -c alias.f=fetch f", &fetch));
    assert!(!touches_script("git log", &fetch));
    let three = prefixes(&["git remote add"]);
    assert!(touches_script("git remote -v add x y", &three));
    assert!(touches_script("git r add x y", &three));
    assert!(!touches_script("git remote -v", &three));
    // A deny by full path matches the program wherever it lives.
    let by_path = prefixes(&["/usr/bin/git push"]);
    assert!(touches_script("git push", &by_path));
    assert!(touches_script("git p", &by_path));
}

#[test]
fn a_deny_on_any_programs_subcommand_catches_wrappers_inline_aliases_and_dashed_forms() {
    let publish = prefixes(&["cargo publish"]);
    for script in [
        "cargo publish",
        "cargo +nightly publish",
        "cargo -Z unstable-options publish",
        "cargo --config 'alias.p=\"publish\"' p",
        "cargo-publish",
        "env cargo publish",
        "timeout 60 cargo publish",
        "xargs cargo",
        "sh -c 'cargo publish'",
    ] {
        assert!(touches_script(script, &publish), "{script:?}");
    }
    for script in ["cargo build", "cargo test --features x", "env cargo test"] {
        assert!(!touches_script(script, &publish), "{script:?}");
    }
    let rm = prefixes(&["rm"]);
    for script in [
        "rm x",
        "/bin/rm x",
        "env rm x",
        "xargs rm",
        "find . -exec rm {} ;",
    ] {
        assert!(touches_script(script, &rm), "{script:?}");
    }
    for script in ["ls", "echo rm", "cargo test --features storm"] {
        assert!(!touches_script(script, &rm), "{script:?}");
    }
}

#[test]
fn a_command_a_deny_refuses_is_refused_even_when_the_checker_cannot_read_it() {
    let push = prefixes(&["git push"]);
    // Not readable: no deny is needed, no allow grant covers it.
    for (script, why) in [
        ("exec git push", NotCovered::Builtin("exec".into())),
        ("eval 'git push'", NotCovered::Builtin("eval".into())),
        (
            "git push > /dev/null",
            NotCovered::Redirection(">/dev/null".into()),
        ),
    ] {
        assert_eq!(
            covers_script(script, &prefixes(&["git", "exec", "eval"])),
            Err(why),
            "{script:?}"
        );
        assert!(!touches_script(script, &push));
    }
}
