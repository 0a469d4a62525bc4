//! Write targets: every place a covered script may write through the words of its commands,
//! checked row by row against the table of writers and write options.

use policy::shell::{
    Dialect, GitConfigScope, NotCovered, WriteTarget, prefix_warning, write_targets,
};

fn targets(script: &str) -> Result<Vec<WriteTarget>, NotCovered> {
    write_targets(script, Dialect::Bash)
}

fn paths(script: &str) -> Vec<String> {
    match targets(script) {
        Ok(found) => found
            .into_iter()
            .filter_map(|t| match t {
                WriteTarget::Path(p) => Some(p),
                WriteTarget::GitConfig { .. } => None,
            })
            .collect(),
        Err(problem) => panic!("{script:?}: {problem}"),
    }
}

/// Checks that each script reports (at least) the paths listed; all rows at once.
fn check_reports(rows: &[(&str, &[&str])]) {
    let mut wrong = Vec::new();
    for (script, want) in rows {
        let got = paths(script);
        let missing: Vec<&&str> = want
            .iter()
            .filter(|w| !got.iter().any(|g| g == *w))
            .collect();
        if !missing.is_empty() {
            wrong.push(format!("{script:?}: missing {missing:?} in {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} rows differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Checks that each script reports none of the paths listed.
fn check_silent(rows: &[(&str, &[&str])]) {
    for (script, never) in rows {
        let got = paths(script);
        for path in *never {
            assert!(
                !got.iter().any(|g| g == path),
                "{script:?} reports {path:?}: {got:?}"
            );
        }
    }
}

fn unknown(script: &str) -> bool {
    matches!(targets(script), Err(NotCovered::UnknownWrite(_)))
}

#[test]
fn the_operands_of_commands_that_write_files_are_write_targets() {
    check_reports(&[
        ("cp a b /dst", &["a", "b", "/dst"]),
        ("cp -t /dst a", &["/dst"]),
        ("cp -at/dst a", &["/dst"]),
        ("cp --target-directory=/dst a", &["/dst"]),
        ("cp --target=/dst a", &["/dst"]),
        ("cp -- -x /dst", &["-x", "/dst"]),
        ("mv a ../b", &["a", "../b"]),
        ("install -D x /usr/local/bin/x", &["/usr/local/bin/x"]),
        ("ln -s /etc/passwd link", &["link", "/etc/passwd"]),
        ("touch -d tomorrow /g/f", &["/g/f"]),
        ("mkdir -p /g/a/b", &["/g/a/b"]),
        ("rm -rf /g", &["/g"]),
        ("rmdir /g/x", &["/g/x"]),
        ("truncate -s 0 /g/f", &["/g/f"]),
        ("tee -a /g/f", &["/g/f"]),
        ("shred -u /g/f", &["/g/f"]),
        ("chmod 600 /g/f", &["/g/f"]),
        ("unlink /g/f", &["/g/f"]),
        ("mkfifo /g/p", &["/g/p"]),
        ("gzip /g/f", &["/g/f"]),
        ("zip -r /g/a.zip src", &["/g/a.zip"]),
        ("rsync -a src/ /g/dst", &["/g/dst"]),
        ("rsync -a --backup-dir=/g/b src/ dst", &["/g/b"]),
        ("scp host:f /g/f", &["/g/f"]),
        ("uniq in /g/out", &["/g/out"]),
        ("split big /g/part", &["/g/part"]),
        ("csplit -f /g/xx f 1", &["/g/xx", "."]),
        ("mktemp -p /g", &["/g"]),
        ("sqlite3 /g/db", &["/g/db"]),
        ("dd if=/dev/zero of=/g/x bs=1", &["/g/x"]),
    ]);
    check_silent(&[("dd if=/dev/zero of=/g/x", &["/dev/zero", "if=/dev/zero"])]);
}

#[test]
fn the_values_of_write_options_of_any_program_are_write_targets() {
    check_reports(&[
        ("sort -o /g/x f", &["/g/x"]),
        ("sort -uo/g/x f", &["/g/x"]),
        ("sort --output=/g/x f", &["/g/x"]),
        ("sort --o=/g/x f", &["/g/x"]),
        ("sort --output /g/x f", &["/g/x"]),
        ("sort -T /g/tmp f", &["/g/tmp"]),
        ("anyprog --output=/g/x", &["/g/x"]),
        ("anyprog --output-file /g/x", &["/g/x"]),
        ("anyprog --log-file=/g/l", &["/g/l"]),
        ("anyprog --outdir /g/d", &["/g/d"]),
        ("anyprog -o /g/x", &["/g/x"]),
        ("anyprog -vo/g/x", &["/g/x"]),
        ("gcc -o /g/a.out x.c", &["/g/a.out"]),
        ("cc -MF /g/deps x.c", &["/g/deps"]),
        ("javac -d /g/classes X.java", &["/g/classes"]),
        (
            "openssl req -new -out /g/r.csr -keyout /g/k",
            &["/g/r.csr", "/g/k"],
        ),
        ("ssh-keygen -t ed25519 -f /g/key", &["/g/key", "~/.ssh"]),
        ("gpg -o /g/x -d f", &["/g/x"]),
        ("gpg --output=/g/x -d f", &["/g/x"]),
        ("less -o /g/log f", &["/g/log"]),
        ("tcpdump -w /g/cap", &["/g/cap"]),
        ("nohup ls", &["nohup.out"]),
        ("/usr/bin/time -o /g/t ls", &["/g/t"]),
        ("7z x a.7z -o/g/x", &["/g/x", "."]),
        ("patch -p1 -d /g/x", &["/g/x", "."]),
        ("patch -o /g/out f", &["/g/out"]),
        ("cargo new /g/pkg", &["/g/pkg"]),
        ("cargo +nightly init --lib /g/pkg", &["/g/pkg"]),
        ("cargo build --target-dir /g/target", &["/g/target"]),
        ("cargo install --root /g/root ripgrep", &["/g/root"]),
        ("pip install --prefix=/g/p x", &["/g/p"]),
        ("anyd --pid-file /g/pid", &["/g/pid"]),
    ]);
    // `-o` that is no output file, and programs that only read.
    check_silent(&[
        ("grep -o foo /etc/f", &["foo", "/etc/f"]),
        ("ls -o /etc", &["/etc"]),
        ("find /etc -name x -o -name y", &["/etc", "-name"]),
        ("cat /etc/passwd", &["/etc/passwd"]),
        ("git log --oneline", &["--oneline"]),
        ("cargo run -- /etc/hosts", &["/etc/hosts"]),
    ]);
    assert_eq!(targets("ls -la /etc; cat x | wc -l"), Ok(vec![]));
}

#[test]
fn sed_writes_its_operands_in_place_and_the_files_of_its_w_commands() {
    check_reports(&[
        ("sed -i s/a/b/ /g/f", &["/g/f"]),
        ("sed -i.bak -e s/a/b/ /g/f /g/h", &["/g/f", "/g/h"]),
        ("sed --in-place=.bak 's/a/b/' /g/f", &["/g/f"]),
        ("sed -ni p /g/f", &["/g/f"]),
        ("sed 's/a/b/w /g/x' f", &["/g/x"]),
        ("sed -n '/x/w /g/out' f", &["/g/out"]),
        ("sed -e p -e 'W /g/w' f", &["/g/w"]),
        ("sed --sandbox -i s/a/b/ /g/f", &["/g/f"]),
    ]);
    check_silent(&[
        ("sed s/new/old/ /g/f", &["/g/f"]),
        ("sed -n p /g/f", &["/g/f"]),
    ]);
    assert!(unknown("sed -f script.sed f"));
    assert!(unknown("sed 'e ls' f"));
    assert!(unknown("sed 's/a/b/e' f"));
    assert!(unknown("sed 's/a/b' f"));
    assert!(targets("sed --sandbox -f script.sed f").is_ok());
}

#[test]
fn archivers_write_their_archive_and_extract_into_the_current_folder() {
    check_reports(&[
        ("tar -czf /g/a.tgz src", &["/g/a.tgz"]),
        ("tar czf /g/a.tgz src", &["/g/a.tgz"]),
        ("tar --file=/g/a.tar -c src", &["/g/a.tar"]),
        ("tar -xf a.tar -C /g/out", &["/g/out", "."]),
        ("tar xf a.tar", &["."]),
        ("tar --extract --file a.tar --directory=/g/x", &["/g/x"]),
        ("tar -cf a.tar --remove-files /g/src", &["/g/src"]),
        ("tar -g /g/snap -cf a.tar src", &["/g/snap"]),
        ("unzip a.zip -d /g/x", &["/g/x", "."]),
        ("cpio -i --no-absolute-filenames", &["."]),
    ]);
    check_silent(&[("tar -czf a.tgz /usr/share/doc", &["/usr/share/doc"])]);
    assert!(unknown("tar -xPf a.tar"));
    assert!(unknown("tar -x --absolute-names -f a.tar"));
    assert!(unknown("tar -xf a.tar --transform s,^,../,"));
    assert!(unknown("unzip -: a.zip"));
    assert!(unknown("cpio -idv"));
}

#[test]
fn downloaders_write_where_their_options_say_or_into_the_current_folder() {
    check_reports(&[
        ("curl -o /g/x https://e.example/", &["/g/x"]),
        ("curl -sSLo /g/x https://e.example/", &["/g/x"]),
        ("curl --output /g/x https://e.example/", &["/g/x"]),
        ("curl -O https://e.example/f", &["."]),
        ("curl --remote-name https://e.example/f", &["."]),
        ("curl --output-dir /g/d -O https://e.example/f", &["/g/d"]),
        ("curl -D /g/h https://e.example/", &["/g/h"]),
        ("curl -c /g/jar https://e.example/", &["/g/jar"]),
        ("curl --trace /g/t https://e.example/", &["/g/t"]),
        ("wget https://e.example/f", &["."]),
        ("wget -O /g/x https://e.example/f", &["/g/x"]),
        ("wget -P /g/d https://e.example/f", &["/g/d"]),
        ("wget --output-document=/g/x https://e.example/f", &["/g/x"]),
        ("wget -o /g/log https://e.example/f", &["/g/log"]),
    ]);
    assert!(unknown("curl -K cfg https://e.example/"));
}

#[test]
fn find_writes_under_its_starting_points_when_it_deletes_or_runs_commands() {
    check_reports(&[
        ("find /g -delete", &["/g"]),
        ("find -name x -delete", &["."]),
        ("find /g -name x -exec rm {} ;", &["/g"]),
        ("find . -exec cp {} /g/dst ;", &["/g/dst", "."]),
        ("find /a -fprint /g/list", &["/g/list"]),
        ("find /a -fls /g/ls", &["/g/ls"]),
        ("find . -exec sh -c 'touch /g/x' ;", &["/g/x"]),
    ]);
    check_silent(&[("find /etc -name passwd", &["/etc"])]);
}

fn configs(script: &str) -> Vec<GitConfigScope> {
    targets(script)
        .unwrap_or_else(|e| panic!("{script:?}: {e}"))
        .into_iter()
        .filter_map(|t| match t {
            WriteTarget::GitConfig { scope } => Some(scope),
            WriteTarget::Path(_) => None,
        })
        .collect()
}

#[test]
fn git_writes_through_its_options_its_subcommands_and_git_config() {
    check_reports(&[
        ("git log --output=/g/x", &["/g/x"]),
        ("git log --output /g/x", &["/g/x"]),
        ("git diff --output=../x", &["../x"]),
        ("git show --outp=/g/x", &["/g/x"]),
        ("git format-patch -o /g/p HEAD~1", &["/g/p"]),
        ("git format-patch --output-directory=/g/p HEAD~1", &["/g/p"]),
        ("git archive -o /g/a.tar HEAD", &["/g/a.tar"]),
        ("git archive --output=/g/a.tar HEAD", &["/g/a.tar"]),
        ("git bundle create /g/b HEAD", &["/g/b"]),
        ("git init /g/repo", &["/g/repo"]),
        ("git init", &["."]),
        ("git init --separate-git-dir=/g/gd x", &["/g/gd", "x"]),
        ("git clone https://e.example/r /g/dir", &["/g/dir"]),
        ("git clone -b main https://e.example/r /g/dir", &["/g/dir"]),
        ("git clone https://e.example/r", &["."]),
        ("git worktree add ../wt", &["../wt"]),
        ("git worktree add -b feat /g/wt", &["/g/wt"]),
        (
            "git -C /g/other log --output=x",
            &["/g/other", "x", "/g/other/x"],
        ),
        ("git -C /g/repo init x", &["/g/repo", "/g/repo/x"]),
        ("git -C a -C b init", &["a", "a/b", "b"]),
        ("git checkout-index -a --prefix=/g/export/", &["/g/export/"]),
        (
            "git fast-export --export-marks=/g/marks HEAD",
            &["/g/marks"],
        ),
        (
            "git commit-graph write --object-dir /g/objects",
            &["/g/objects"],
        ),
    ]);
    check_silent(&[(
        "git clone https://e.example/r /g/dir",
        &["https://e.example/r"],
    )]);
    assert_eq!(
        configs("git config user.name x"),
        vec![GitConfigScope::Local]
    );
    assert_eq!(
        configs("git config --global user.name x"),
        vec![GitConfigScope::Global]
    );
    assert_eq!(
        configs("git config --gl user.name x"),
        vec![GitConfigScope::Global]
    );
    assert_eq!(
        configs("git config --system a.b c"),
        vec![GitConfigScope::System]
    );
    assert_eq!(
        configs("git config --worktree a.b c"),
        vec![GitConfigScope::Worktree]
    );
    assert_eq!(
        configs("git config -f /g/c a.b c"),
        vec![GitConfigScope::File("/g/c".into())]
    );
    assert_eq!(
        configs("git config --file=rel a.b c"),
        vec![GitConfigScope::File("rel".into())]
    );
    assert_eq!(
        configs("git config --global --no-global a.b c"),
        vec![GitConfigScope::Local]
    );
    assert_eq!(
        configs("git config set --global a.b c"),
        vec![GitConfigScope::Global]
    );
    assert_eq!(configs("git config unset a.b"), vec![GitConfigScope::Local]);
    assert_eq!(
        configs("git config --unset a.b"),
        vec![GitConfigScope::Local]
    );
    assert_eq!(
        configs("git config --add a.b c"),
        vec![GitConfigScope::Local]
    );
    assert_eq!(
        configs("git config --rename-section a b"),
        vec![GitConfigScope::Local]
    );
    assert_eq!(configs("git config -e"), vec![GitConfigScope::Local]);
    assert_eq!(
        configs("git config edit --global"),
        vec![GitConfigScope::Global]
    );
    for read in [
        "git config --get user.name",
        "git config user.name",
        "git config --list",
        "git config -l --global",
        "git config get user.name",
        "git config list --show-origin",
        "git config --get-regexp '^alias'",
        "git config --type=bool --get a.b",
    ] {
        assert_eq!(configs(read), vec![], "{read}");
    }
    assert!(unknown("git config --bogus a.b c"));
    assert!(unknown("git apply --unsafe-paths p.diff"));
    assert!(unknown("git format-patch HEAD~1"));
    assert_eq!(
        paths("git format-patch --stdout HEAD~1"),
        Vec::<String>::new()
    );
    assert!(matches!(
        targets("git -c a.b=c log"),
        Err(NotCovered::GitOption(_))
    ));
}

#[test]
fn wrappers_and_shells_are_looked_into() {
    check_reports(&[
        ("env cp a /g/x", &["/g/x"]),
        ("timeout 5 tee /g/x", &["/g/x"]),
        ("nice -n 5 sh -c 'touch /g/x'", &["/g/x"]),
        ("sudo sh -c 'touch /g/x'", &["/g/x"]),
        ("env -C /g/d touch f", &["/g/d", "/g/d/f"]),
        ("sh -c 'cp a /g/x'", &["/g/x"]),
        ("bash -c \"sh -c 'rm /g/x'\"", &["/g/x"]),
        ("ls && (cd /g && touch f)", &["f", "/g/f"]),
    ]);
    assert!(unknown("ls | xargs rm"));
    assert!(unknown("xargs -I{} cp {} /g"));
    assert!(unknown("bash script.sh"));
    assert!(unknown("env bash script.sh"));
    assert!(unknown("sudo bash -lc 'touch x'"));
    assert!(unknown("env -S 'rm -rf /g'"));
    assert!(unknown("env GIT_DIR=/g/.git git init"));
    assert!(unknown("env HOME=/g git config --global a.b c"));
    assert!(unknown("sudo TMPDIR=/g sort -o x y"));
    assert_eq!(paths("env LANG=C LC_ALL=C sort -o /g/x y"), vec!["/g/x"]);
    assert!(unknown("watch 'touch /g/x'"));
    assert!(unknown("flock /g/lock -c 'rm /g/x'"));
    assert_eq!(
        targets("sh -c 'touch x > y'"),
        Err(NotCovered::Redirection(">y".into()))
    );
}

#[test]
fn relative_paths_after_cd_are_reported_under_each_folder_the_script_may_be_in() {
    check_reports(&[
        ("cd /g && touch f", &["f", "/g/f"]),
        ("cd a; cd b; touch f", &["f", "a/f", "b/f", "a/b/f"]),
        ("cd && touch f", &["~/f"]),
        ("cd ~/w && touch f", &["~/w/f"]),
        ("pushd /g && touch f", &["/g/f"]),
        ("cd - && touch f", &["f"]),
        ("cd /g && touch /abs", &["/abs"]),
        ("cd /g; sh -c 'touch f'", &["/g/f"]),
    ]);
    let many = "cd a; ".repeat(40) + "touch f";
    assert!(unknown(&many));
}

#[test]
fn a_tilde_is_reported_as_written_and_as_a_literal_folder_where_it_may_stay_one() {
    assert_eq!(paths("touch ~/f"), vec!["~/f"]);
    assert_eq!(paths("touch '~/f'"), vec!["~/f", "./~/f"]);
    assert_eq!(paths("sort -o~/x f"), vec!["~/x", "./~/x"]);
    assert_eq!(paths("dd of=~/x"), vec!["~/x", "./~/x"]);
    assert_eq!(paths("touch ~other/f"), vec!["~other/f", "./~other/f"]);
    check_reports(&[("touch ~+/f", &["./f", "./~+/f"]), ("touch ~-/f", &["./f"])]);
}

#[test]
fn write_targets_of_a_script_sh_runs_follow_posix_rules() {
    assert_eq!(
        write_targets("touch $'x'", Dialect::Posix),
        Err(NotCovered::ShellDialect("$'…".into()))
    );
    let tilde = write_targets("touch a=~/x", Dialect::Posix);
    assert!(
        matches!(&tilde, Err(NotCovered::ShellDialect(what)) if what.starts_with("`a=~/x` (a `~` inside a word")),
        "{tilde:?}"
    );
    assert_eq!(
        write_targets("touch /g/x", Dialect::Posix),
        Ok(vec![WriteTarget::Path("/g/x".into())])
    );
    assert_eq!(
        write_targets("sh -c \"touch \\$'\\\\' ; touch /g/p # '\"", Dialect::Bash),
        Err(NotCovered::ShellDialect("$'…".into()))
    );
    assert_eq!(
        write_targets("touch $'/g/a\\tb'", Dialect::Bash),
        Ok(vec![WriteTarget::Path("/g/a\tb".into())])
    );
    let escaped = write_targets("touch $'\\x2e\\x2e/x'", Dialect::Bash);
    assert!(
        matches!(&escaped, Err(NotCovered::Unsupported(what)) if what.contains("escape by number")),
        "{escaped:?}"
    );
}

#[test]
fn write_targets_are_listed_once_in_order() {
    assert_eq!(
        targets("touch b a b; rm a"),
        Ok(vec![
            WriteTarget::Path("b".into()),
            WriteTarget::Path("a".into())
        ])
    );
    assert_eq!(targets(""), Err(NotCovered::Empty));
    assert_eq!(
        targets("touch $(x)"),
        Err(NotCovered::Substitution("$(x)".into()))
    );
}

#[test]
fn prefixes_that_write_files_through_options_get_a_warning() {
    let warn = |p: &[&str]| prefix_warning(&p.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>());
    for (prefix, mentions) in [
        (&["git", "log"][..], "--output"),
        (&["git", "diff"], "--output"),
        (&["git", "show"], "--output"),
        (&["git", "format-patch"], "-o"),
        (&["curl"], "-o"),
        (&["wget"], "-O"),
        (&["dd"], "of="),
        (&["openssl"], "-out"),
        (&["find", "."], "-exec"),
    ] {
        let warning = warn(prefix).unwrap_or_default();
        assert!(warning.contains(mentions), "{prefix:?}: {warning:?}");
    }
    for quiet in [
        &["git", "status"][..],
        &["ls"],
        &["cat"],
        &["grep"],
        &["touch"],
    ] {
        assert_eq!(warn(quiet), None, "{quiet:?}");
    }
}
