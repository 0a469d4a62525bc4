//! The guard rails on a script, beside shell coverage's table: which scripts the catastrophic
//! rail refuses and which it lets through (wrappers, quoting, pipelines, control flow, nested
//! `sh -c`), the background rail, and the words the protected-path rail reads.

use std::path::{Path, PathBuf};

use policy::shell::{Place, backgrounded, catastrophic, path_words, script_words};

/// The granted folder's base every row runs under.
const BASE: &str = "/work/proj";
/// The owner's home folder.
const HOME: &str = "/home/owner";

/// Where a row's script runs.
#[derive(Debug, Clone, Copy)]
enum At {
    /// The granted folder's base.
    Base,
    /// A folder inside it.
    Sub,
    /// The root folder.
    Root,
    /// The home folder.
    Home,
}

fn cwd(at: At) -> PathBuf {
    PathBuf::from(match at {
        At::Base => BASE,
        At::Sub => "/work/proj/src",
        At::Root => "/",
        At::Home => HOME,
    })
}

fn found(script: &str, at: At) -> Option<String> {
    let cwd = cwd(at);
    let granted = [PathBuf::from(BASE)];
    let place = Place {
        cwd: &cwd,
        home: Some(Path::new(HOME)),
        granted: &granted,
    };
    catastrophic(script, &place)
}

/// Scripts the rail refuses, each with a part of the reason it must give.
const REFUSED: &[(&str, At, &str)] = &[
    ("rm -rf /", At::Sub, "the root folder"),
    ("rm -r /", At::Sub, "the root folder"),
    ("rm -R /", At::Sub, "the root folder"),
    ("rm -fr /", At::Sub, "the root folder"),
    ("rm -r -f /", At::Sub, "the root folder"),
    ("rm --recursive --force /", At::Sub, "the root folder"),
    ("rm --recur /", At::Sub, "the root folder"),
    ("rm -rf -- /", At::Sub, "the root folder"),
    ("rm --no-preserve-root -rf /", At::Sub, "--no-preserve-root"),
    ("rm -rf '/'", At::Sub, "the root folder"),
    ("rm -rf \"/\"", At::Sub, "the root folder"),
    ("rm -rf //", At::Sub, "the root folder"),
    ("rm -rf /tmp/../", At::Sub, "the root folder"),
    ("'rm' -rf /", At::Sub, "the root folder"),
    ("r\\m -rf /", At::Sub, "the root folder"),
    ("\\rm -rf /", At::Sub, "the root folder"),
    ("/bin/rm -rf /", At::Sub, "the root folder"),
    ("rm -rf ~", At::Sub, "the home folder"),
    ("rm -rf ~/", At::Sub, "the home folder"),
    ("rm -rf $HOME", At::Sub, "the home folder"),
    ("rm -rf \"$HOME\"", At::Sub, "the home folder"),
    ("rm -rf ${HOME}", At::Sub, "the home folder"),
    ("rm -rf \"${HOME}/\"", At::Sub, "the home folder"),
    ("rm -rf \"$HOME\"/", At::Sub, "the home folder"),
    ("rm -rf /home/owner", At::Sub, "the home folder"),
    ("rm -rf ~root", At::Sub, "another user's home"),
    ("rm -rf /*", At::Sub, "the root folder"),
    ("rm -rf /.*", At::Sub, "the root folder"),
    ("rm -rf /u*", At::Sub, "entries of the root folder"),
    ("rm -rf ~/*", At::Sub, "the home folder"),
    ("rm -rf $HOME/*", At::Sub, "the home folder"),
    ("rm -rf *", At::Base, "the granted folder /work/proj"),
    ("rm -rf .", At::Base, "the granted folder /work/proj"),
    ("rm -rf ./", At::Base, "the granted folder /work/proj"),
    ("rm -rf *", At::Root, "the root folder"),
    ("rm -rf *", At::Home, "the home folder"),
    ("rm -rf .", At::Home, "the home folder"),
    ("rm -rf ..", At::Sub, "the granted folder /work/proj"),
    ("rm -rf /work/proj", At::Sub, "the granted folder"),
    ("rm -rf /work", At::Sub, "the system folder /work"),
    ("rm -rf /usr", At::Sub, "the system folder /usr"),
    ("rm -rf /home", At::Sub, "the system folder /home"),
    ("rm -rf \"$DIR\"", At::Sub, "only known when it runs"),
    ("rm -rf $(pwd)", At::Sub, "only known when it runs"),
    ("rm -rf `pwd`/x", At::Sub, "only known when it runs"),
    ("$RM -rf /", At::Sub, "the root folder"),
    ("rm $FLAGS /", At::Sub, "the root folder"),
    (
        "find . -name '*.o' | xargs rm -rf",
        At::Sub,
        "another program adds",
    ),
    ("xargs -0 rm -r < list", At::Sub, "another program adds"),
    (
        "find . -type d -exec rm -rf {} +",
        At::Sub,
        "another program adds",
    ),
    ("find . -exec rm -r {} \\;", At::Sub, "another program adds"),
    (
        "find . -exec sh -c 'rm -rf {}' \\;",
        At::Sub,
        "only known when it runs",
    ),
    (
        "xargs sh -c 'rm -rf \"$@\"'",
        At::Sub,
        "only known when it runs",
    ),
    ("find / -delete", At::Sub, "`find -delete` from `/`"),
    ("find ~ -name '*.tmp' -delete", At::Sub, "the home folder"),
    ("find -L / -name core -delete", At::Sub, "the root folder"),
    ("find . -delete", At::Base, "the granted folder"),
    ("find -delete", At::Base, "the granted folder"),
    ("find . -type f -delete", At::Base, "the granted folder"),
    ("find \"$X\" -delete", At::Sub, "only known when it runs"),
    ("mkfs.ext4 /dev/sda1", At::Sub, "makes a file system"),
    ("mkfs -t ext4 /dev/sdb", At::Sub, "makes a file system"),
    ("wipefs -a /dev/sda", At::Sub, "wipes a file system"),
    (
        "dd if=/dev/zero of=/dev/sda bs=1M",
        At::Sub,
        "the device /dev/sda",
    ),
    (
        "dd of=/dev/nvme0n1 if=disk.img",
        At::Sub,
        "the device /dev/nvme0n1",
    ),
    (
        "cat image > /dev/sda",
        At::Sub,
        "a redirection writes to the device /dev/sda",
    ),
    ("echo x >> /dev/sdb1", At::Sub, "the device /dev/sdb1"),
    ("cat x &> /dev/sda", At::Sub, "the device /dev/sda"),
    (
        "echo hi | tee /dev/sda",
        At::Sub,
        "`tee` writes to the device",
    ),
    ("shred /dev/sda", At::Sub, "`shred` writes to the device"),
    ("chmod -R 777 /", At::Sub, "a recursive `chmod` of `/`"),
    ("chown -R nobody /", At::Sub, "a recursive `chown`"),
    ("chmod --recursive 000 ~", At::Sub, "the home folder"),
    ("chgrp -hR staff /usr", At::Sub, "the system folder /usr"),
    (":(){ :|:& };:", At::Sub, "fork bomb"),
    ("bomb(){ bomb|bomb& }; bomb", At::Sub, "`bomb`"),
    ("f() { f | f; }; f", At::Sub, "fork bomb"),
    ("a() { b & }; b() { a & }; a", At::Sub, "fork bomb"),
    ("shutdown -h now", At::Sub, "stops the machine"),
    ("/sbin/shutdown -r now", At::Sub, "stops the machine"),
    ("reboot", At::Sub, "stops the machine"),
    ("halt", At::Sub, "stops the machine"),
    ("poweroff", At::Sub, "stops the machine"),
    ("systemctl reboot", At::Sub, "`systemctl reboot`"),
    ("init 0", At::Sub, "`init 0`"),
    ("sh -c 'rm -rf /'", At::Sub, "the root folder"),
    ("bash -lc \"rm -rf ~\"", At::Sub, "the home folder"),
    ("bash -c -- 'rm -rf /'", At::Sub, "the root folder"),
    ("sh -c \"sh -c 'rm -rf /'\"", At::Sub, "the root folder"),
    (
        "bash -c 'bash -c \"sh -c \\\"rm -rf /\\\"\"'",
        At::Sub,
        "the root folder",
    ),
    ("/bin/dash -ec 'reboot'", At::Sub, "stops the machine"),
    ("env rm -rf /", At::Sub, "the root folder"),
    ("env -i PATH=/bin rm -rf /", At::Sub, "the root folder"),
    ("env -S 'rm -rf /'", At::Sub, "the root folder"),
    ("sudo -u root rm -rf /", At::Sub, "the root folder"),
    ("sudo sh -c 'rm -rf /'", At::Sub, "the root folder"),
    ("nohup rm -rf ~", At::Sub, "the home folder"),
    ("time rm -rf /", At::Sub, "the root folder"),
    ("/usr/bin/time -v rm -rf /", At::Sub, "the root folder"),
    ("nice -n 19 timeout 10 rm -rf /", At::Sub, "the root folder"),
    ("exec rm -rf /", At::Sub, "the root folder"),
    ("command rm -rf /", At::Sub, "the root folder"),
    ("busybox rm -rf /", At::Sub, "the root folder"),
    ("watch 'rm -rf /'", At::Sub, "the root folder"),
    ("su -c 'poweroff'", At::Sub, "stops the machine"),
    ("ls | rm -rf /", At::Sub, "the root folder"),
    ("true && rm -rf /", At::Sub, "the root folder"),
    ("false || rm -rf ~", At::Sub, "the home folder"),
    ("(cd /tmp && rm -rf /)", At::Sub, "the root folder"),
    ("{ rm -rf /; }", At::Sub, "the root folder"),
    ("if true; then rm -rf /; fi", At::Sub, "the root folder"),
    (
        "for d in a b; do rm -rf ~; done",
        At::Sub,
        "the home folder",
    ),
    ("while true; do reboot; done", At::Sub, "stops the machine"),
    ("cat <(rm -rf /)", At::Sub, "the root folder"),
    ("X=1 rm -rf /", At::Sub, "the root folder"),
    ("rm -rf / > /dev/null 2>&1", At::Sub, "the root folder"),
];

/// Scripts the rail lets through (coverage and the sandbox still judge them).
const ALLOWED: &[(&str, At)] = &[
    ("rm -rf target", At::Base),
    ("rm -rf ./build", At::Base),
    ("rm -r src/old", At::Base),
    ("rm -rf *", At::Sub),
    ("rm -rf .", At::Sub),
    ("rm -rf build/*", At::Base),
    ("rm -rf *.o", At::Base),
    ("rm -f *", At::Base),
    ("rm file.txt", At::Base),
    ("rm \"$f\"", At::Base),
    ("rm -f /tmp/x.log", At::Base),
    ("rm -rf /tmp/build-123", At::Base),
    ("rm -rf ~/proj/target", At::Base),
    ("rm -rf \"$HOME/.cache/pip\"", At::Base),
    ("rm -rf node_modules && npm install", At::Base),
    ("rm -r -- -weird-name", At::Base),
    ("find . -name '*.pyc' -delete", At::Base),
    ("find build -delete", At::Base),
    ("find /tmp/x -delete", At::Base),
    ("find ~/proj/target -delete", At::Base),
    ("find . -type f -name '*.o' -exec rm {} +", At::Base),
    ("find . -name x | xargs rm", At::Base),
    ("find . -name '*.rs' -exec grep -l TODO {} +", At::Base),
    ("xargs echo < list", At::Base),
    ("echo 'rm -rf /'", At::Base),
    ("git commit -m \"rm -rf /\"", At::Base),
    ("grep -r \"rm -rf\" .", At::Base),
    ("echo shutdown", At::Base),
    ("dd if=/dev/zero of=/dev/null bs=1M count=1", At::Base),
    ("dd if=/dev/zero of=disk.img bs=1M count=10", At::Base),
    ("ls > /dev/null 2>&1", At::Base),
    ("echo x > /dev/stderr", At::Base),
    ("cat /dev/sda | head -c 512 | xxd", At::Base),
    ("chmod -R u+w .", At::Base),
    ("chmod 755 script.sh", At::Base),
    ("chmod 755 /", At::Base),
    ("chown -R owner:owner build", At::Base),
    ("f() { echo hi; }; f", At::Base),
    ("f() { g; }; g() { echo; }; f | cat", At::Base),
    ("count() { count_one; }; count", At::Base),
    ("sh -c 'ls -la'", At::Base),
    ("bash -lc \"cargo test\"", At::Base),
    ("sh -c \"sh -c 'rm -rf target'\"", At::Base),
    ("sudo apt-get install ripgrep", At::Base),
    ("env FOO=bar cargo build", At::Base),
    ("time cargo build", At::Base),
    ("nohup cargo build", At::Base),
    ("mkdir -p build && cd build", At::Base),
    ("systemctl status nginx", At::Base),
    ("cat /proc/cpuinfo", At::Base),
    ("rm -rf ~/.cache/thing", At::Base),
    ("ls -la / ~", At::Base),
    ("cp -r / backup", At::Base),
    ("tar czf home.tgz ~", At::Base),
    ("python3 -c 'import shutil'", At::Base),
    ("rm -rf '*'", At::Base),
];

#[test]
fn the_catastrophic_rail_refuses_every_row_of_its_table_with_its_reason() {
    let wrong: Vec<String> = REFUSED
        .iter()
        .filter_map(|&(script, at, part)| match found(script, at) {
            Some(reason) if reason.contains(part) => None,
            other => Some(format!(
                "{script:?} at {at:?}: want {part:?}, got {other:?}"
            )),
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} rows differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_catastrophic_rail_lets_every_ordinary_row_through() {
    let wrong: Vec<String> = ALLOWED
        .iter()
        .filter_map(|&(script, at)| {
            found(script, at).map(|reason| format!("{script:?} at {at:?}: refused ({reason})"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} rows differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_table_holds_at_least_eighty_scripts() {
    assert!(REFUSED.len() + ALLOWED.len() >= 80);
}

#[test]
fn a_script_the_rail_cannot_read_is_left_to_coverage() {
    for script in [
        "rm -rf / <<EOF\nx\nEOF",
        "((x)) && rm -rf /",
        "rm -rf '/",
        "",
    ] {
        assert_eq!(found(script, At::Sub), None, "{script:?}");
    }
}

#[test]
fn nesting_is_followed_to_the_bound_and_deeper_scripts_are_left_to_coverage() {
    let nested = |depth: usize| {
        format!(
            "{}rm -rf /{}",
            "if true; then ".repeat(depth),
            "; fi".repeat(depth)
        )
    };
    assert!(found(&nested(8), At::Sub).is_some());
    assert_eq!(found(&nested(9), At::Sub), None);
    let parens = |depth: usize| {
        format!(
            "{}rm -rf /{}",
            "( true && ".repeat(depth),
            " )".repeat(depth)
        )
    };
    assert!(found(&parens(8), At::Sub).is_some());
    assert_eq!(found(&parens(9), At::Sub), None);
    let cases = "case a in a) case b in b) rm -rf / ;; esac ;; esac";
    assert!(found(cases, At::Sub).is_some());
    assert_eq!(
        found(&format!("case c in c) {cases} ;; esac"), At::Sub),
        None
    );
}

#[test]
fn a_background_ampersand_is_found_in_the_script_itself_only() {
    for script in [
        "sleep 10 &",
        "cargo build & cargo test",
        "(sleep 1 &)",
        "{ x & }",
        "a && b &",
    ] {
        assert!(backgrounded(script), "{script:?}");
    }
    for script in [
        "a && b",
        "ls &> out",
        "ls 2>&1",
        "echo '&'",
        "echo \\&",
        "sh -c 'sleep 1 &'",
        "echo $(sleep 1 &)",
    ] {
        assert!(!backgrounded(script), "{script:?}");
    }
}

#[test]
fn path_words_are_every_literal_word_value_and_redirection_target() {
    let words = path_words(
        "cat ~/.config/x --file=/etc/y && ls > out 2> /tmp/err; sh -c 'cat inner/z' ; echo $X a*/b",
    );
    for want in [
        "cat",
        "~/.config/x",
        "--file=/etc/y",
        "/etc/y",
        "out",
        "/tmp/err",
        "inner/z",
        ".",
    ] {
        assert!(words.iter().any(|w| w == want), "{want} in {words:?}");
    }
    assert!(!words.iter().any(|w| w.contains("$X")), "{words:?}");
}

mod properties {
    use proptest::prelude::*;

    use super::{At, found};
    use policy::shell::{backgrounded, path_words};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_rails_return_on_any_string(script in any::<String>()) {
            let _ = found(&script, At::Sub);
            let _ = backgrounded(&script);
            let _ = path_words(&script);
        }

        #[test]
        fn the_rails_return_on_shell_like_text(
            script in proptest::collection::vec(
                prop_oneof![
                    Just("rm"), Just(" -rf"), Just(" /"), Just(" ~"), Just(" $HOME"), Just(" *"),
                    Just(" ."), Just("find"), Just(" -delete"), Just(" -exec "), Just(" {} +"),
                    Just("xargs "), Just("sudo "), Just("env "), Just(" "), Just("\n"), Just(";"),
                    Just("&&"), Just("||"), Just("|"), Just("&"), Just("("), Just(")"), Just("{"),
                    Just("}"), Just("'"), Just("\""), Just("\\"), Just("$"), Just("`"), Just("$("),
                    Just("${"), Just("<"), Just(">"), Just("#"), Just("f()"), Just(":"),
                    Just("if "), Just("then "), Just("fi"), Just("case "), Just(" in "), Just("esac"),
                    Just("for x in a; do "), Just("done"), Just("while "), Just("sh -c "),
                    Just("bash -lc "), Just("> /dev/sda"),
                ],
                0..40,
            )
        ) {
            let script: String = script.concat();
            let _ = found(&script, At::Base);
            let _ = backgrounded(&script);
            let _ = path_words(&script);
        }

        /// Whatever wraps it, a recursive delete of the root is found.
        #[test]
        fn rm_rf_of_the_root_is_found_behind_any_wrappers(
            wrappers in proptest::collection::vec(
                prop_oneof![
                    Just("sudo "), Just("env "), Just("nohup "), Just("time "), Just("nice -n 5 "),
                    Just("timeout 10 "), Just("command "), Just("env A=1 "), Just("sudo -u root "),
                ],
                0..6,
            ),
            before in prop_oneof![Just(""), Just("true && "), Just("ls | "), Just("echo x; ")],
        ) {
            let script = format!("{before}{}rm -rf /", wrappers.concat());
            prop_assert!(found(&script, At::Sub).is_some(), "{}", script);
            let nested = format!("sh -c '{script}'");
            prop_assert!(found(&nested, At::Sub).is_some(), "{}", nested);
        }
    }
}

#[test]
fn script_words_are_every_word_decoded_with_nested_scripts_and_none_when_unreadable() {
    let words = script_words(
        "curl 'https://a.example/'\"x\" > out.txt && sh -c 'git push origin main' | tee \"$(date)\"",
    )
    .unwrap();
    for want in [
        "curl",
        "https://a.example/x",
        "out.txt",
        "sh",
        "-c",
        "git push origin main",
        "git",
        "push",
        "origin",
        "main",
        "tee",
        "$(date)",
    ] {
        assert!(words.iter().any(|w| w == want), "{want} not in {words:?}");
    }
    assert_eq!(script_words("echo ("), None);
}
