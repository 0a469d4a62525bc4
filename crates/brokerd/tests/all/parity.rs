//! The parity journal (seed 003): a fixed list of calls through the real broker on a fixture
//! tree, each call's input and answer (results, diffs, errors, denials) and the final tree
//! written as one text, which must equal the committed `tests/parity/journal.md` byte for byte.
//!
//! Temporary folders become `{work}`, `{config}` and `{state}`; header fields that depend on
//! the machine or the moment (`containment`) become `…`. Every fixture's modification time is
//! set, so `glob`'s newest-first order is fixed. After a deliberate change, regenerate with
//! `BOXMAKER_PARITY_UPDATE=1 cargo test -p brokerd --test all parity` and review the diff.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use proto::ToolResponse;
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use testkit::{AgentClient, BrokerProcess};

use super::daemon::{FAST, git, searxng};

/// The journal's grants: labels explicit, nothing asks.
const GRANTS: &str = r#"
[[grant]]
id = "read"
tool = "read"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "write"
tool = "write"
paths = ["{work}"]
class = "private"
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "shell"
tool = "shell"
paths = ["{work}"]
commands = ["ls", "cat", "printf", "sleep", "echo"]
class = "private"
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "fetch"
tool = "http_fetch"
hosts = ["127.0.0.1:{port}"]
class = "public"
on_untrusted = "allow"

[[grant]]
id = "search"
tool = "web_search"
class = "public"
on_untrusted = "allow"

[[grant]]
id = "git"
tool = ["git_status", "git_diff"]
paths = ["{work}/repo"]
class = "private"
untrusted = false

[[grant]]
id = "clone"
tool = "git_clone"
hosts = ["127.0.0.1:{port}"]
paths = ["{work}/cloned"]
class = "public"
on_untrusted = "allow"

[[grant]]
id = "jobs"
tool = "bash_bg"
paths = ["{work}"]
commands = ["echo", "sleep"]
class = "private"
untrusted = false
on_untrusted = "allow"
"#;

/// The fixture tree, written by the set-up (a `.git` folder makes `.gitignore` apply).
const TREE: &[(&str, &[u8])] = &[
    (".git/HEAD", b"ref: refs/heads/main\n"),
    (".gitignore", b"*.log\ntarget/\n"),
    ("README.md", b"# Parity\n\nA readme for the parity journal.\nThe needle is here.\n"),
    ("notes.txt", b"first note\nsecond note\nthird note\n"),
    ("crlf.txt", b"alpha\r\nbeta\r\ngamma\r\n"),
    ("latin1.txt", b"caf\xe9 au lait\n"),
    ("bin.dat", b"ELF\0\x01\x02needle\0"),
    ("build.log", b"needle in an ignored log\n"),
    ("target/out.txt", b"needle in an ignored folder\n"),
    (".hidden/secret.txt", b"needle in a hidden folder\n"),
    ("docs/guide.md", b"# Guide\n\nRead the README first.\nThen the code.\n"),
    (
        "src/main.rs",
        b"fn main() {\n    let total = add(1, 2);\n    println!(\"{total}\");\n}\n\nfn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    ),
    (
        "src/lib.rs",
        b"//! The library.\n\npub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n// TODO: three\n// TODO: four\n",
    ),
    ("src/util/strings.rs", b"pub fn shout(s: &str) -> String {\n    s.to_uppercase()\n}\n"),
];

fn set_up(work: &Path) {
    let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
    for (index, (name, bytes)) in TREE.iter().enumerate() {
        let path = work.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, bytes).unwrap();
        let when = epoch + Duration::from_secs(60 * index as u64);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    std::os::unix::fs::symlink(work.join("notes.txt"), work.join("link.txt")).unwrap();
    let repo = work.join("repo");
    fs::create_dir_all(repo.join("docs")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "parity@example.com"]);
    git(&repo, &["config", "user.name", "Parity"]);
    fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    fs::write(repo.join("b.txt"), "bee\n").unwrap();
    fs::write(repo.join("docs/guide.md"), "# Guide\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    fs::write(repo.join("a.txt"), "one\n2\n").unwrap();
    fs::write(repo.join("b.txt"), "bee\nsee\n").unwrap();
    git(&repo, &["add", "b.txt"]);
    fs::write(repo.join("c.txt"), "new\n").unwrap();
}

/// The journal's repository as a bare one served over https by git's dumb protocol, from
/// `served` (outside the work folder).
fn serve_repository(server: &TlsServer, work: &Path, served: &Path) {
    let bare = served.join("repo.git");
    git(
        served,
        &[
            "clone",
            "-q",
            "--bare",
            work.join("repo").to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(&bare, &["update-server-info"]);
    server.route_folder("/repo.git", &bare);
    server.route(
        "/repo.git/info/refs?service=git-upload-pack",
        TlsResponse::ok("text/plain", fs::read(bare.join("info/refs")).unwrap()),
    );
}

/// The calls: a label, a tool, and its arguments (`{work}` and `{config}` replaced).
const CALLS: &[(&str, &str, &str)] = &[
    (
        "read a whole file",
        "read_file",
        r#"{"path":"{work}/README.md"}"#,
    ),
    (
        "read lines 2 to 4",
        "read_file",
        r#"{"path":"{work}/src/main.rs","offset":2,"limit":3}"#,
    ),
    (
        "read past the end",
        "read_file",
        r#"{"path":"{work}/notes.txt","offset":10}"#,
    ),
    (
        "read no lines",
        "read_file",
        r#"{"path":"{work}/notes.txt","limit":0}"#,
    ),
    (
        "read a binary file",
        "read_file",
        r#"{"path":"{work}/bin.dat"}"#,
    ),
    (
        "read invalid UTF-8",
        "read_file",
        r#"{"path":"{work}/latin1.txt"}"#,
    ),
    (
        "read a missing file",
        "read_file",
        r#"{"path":"{work}/missing.txt"}"#,
    ),
    ("read a folder", "read_file", r#"{"path":"{work}/src"}"#),
    (
        "read through a link",
        "read_file",
        r#"{"path":"{work}/link.txt"}"#,
    ),
    (
        "read with an unknown field",
        "read_file",
        r#"{"path":"{work}/notes.txt","lines":3}"#,
    ),
    (
        "read with a negative offset",
        "read_file",
        r#"{"path":"{work}/notes.txt","offset":-1}"#,
    ),
    (
        "read outside every grant",
        "read_file",
        r#"{"path":"/etc/hostname"}"#,
    ),
    (
        "read boxmaker's grants",
        "read_file",
        r#"{"path":"{config}/grants/grants.toml"}"#,
    ),
    ("list the folder", "list_files", r#"{"path":"{work}"}"#),
    (
        "list the tree",
        "list_files",
        r#"{"path":"{work}","recursive":true}"#,
    ),
    (
        "list the tree one level deep",
        "list_files",
        r#"{"path":"{work}","recursive":true,"max_depth":1}"#,
    ),
    (
        "list a sub-folder",
        "list_files",
        r#"{"path":"{work}/src","recursive":true}"#,
    ),
    (
        "list a file",
        "list_files",
        r#"{"path":"{work}/notes.txt"}"#,
    ),
    (
        "list a missing folder",
        "list_files",
        r#"{"path":"{work}/nowhere"}"#,
    ),
    (
        "list with a wrong field",
        "list_files",
        r#"{"path":"{work}","depth":2}"#,
    ),
    (
        "glob the Rust files",
        "glob",
        r#"{"pattern":"**/*.rs","path":"{work}"}"#,
    ),
    (
        "glob at the top only",
        "glob",
        r#"{"pattern":"*.md","path":"{work}"}"#,
    ),
    (
        "glob a folder",
        "glob",
        r#"{"pattern":"docs/**","path":"{work}"}"#,
    ),
    (
        "glob nothing",
        "glob",
        r#"{"pattern":"**/*.py","path":"{work}"}"#,
    ),
    (
        "glob a bad pattern",
        "glob",
        r#"{"pattern":"src/[a","path":"{work}"}"#,
    ),
    ("glob without a path", "glob", r#"{"pattern":"*"}"#),
    (
        "grep files",
        "grep",
        r#"{"pattern":"needle","path":"{work}"}"#,
    ),
    (
        "grep lines",
        "grep",
        r#"{"pattern":"fn \\w+","path":"{work}","output_mode":"content"}"#,
    ),
    (
        "grep counts",
        "grep",
        r#"{"pattern":"TODO","path":"{work}","output_mode":"count"}"#,
    ),
    (
        "grep ignoring case",
        "grep",
        r#"{"pattern":"readme","path":"{work}","output_mode":"content","case_insensitive":true}"#,
    ),
    (
        "grep with context",
        "grep",
        r#"{"pattern":"println","path":"{work}","output_mode":"content","context":1}"#,
    ),
    (
        "grep with lines before",
        "grep",
        r#"{"pattern":"a \\+ b","path":"{work}","output_mode":"content","before":2}"#,
    ),
    (
        "grep markdown only",
        "grep",
        r#"{"pattern":"the","path":"{work}","output_mode":"content","glob":"*.md"}"#,
    ),
    (
        "grep Rust only",
        "grep",
        r#"{"pattern":"pub","path":"{work}","type":"rust"}"#,
    ),
    (
        "grep an unknown type",
        "grep",
        r#"{"pattern":"x","path":"{work}","type":"nosuchtype"}"#,
    ),
    (
        "grep across lines",
        "grep",
        r#"{"pattern":"fn main\\(\\) \\{\\n\\s+let","path":"{work}","output_mode":"content","multiline":true}"#,
    ),
    (
        "grep a bad regex",
        "grep",
        r#"{"pattern":"(unclosed","path":"{work}"}"#,
    ),
    (
        "grep one file",
        "grep",
        r#"{"pattern":"note","path":"{work}/notes.txt","output_mode":"content"}"#,
    ),
    (
        "grep a wrong mode",
        "grep",
        r#"{"pattern":"x","path":"{work}","output_mode":"lines"}"#,
    ),
    (
        "grep outside every grant",
        "grep",
        r#"{"pattern":"root","path":"/etc"}"#,
    ),
    (
        "grep boxmaker's state",
        "grep",
        r#"{"pattern":"x","path":"{state}"}"#,
    ),
    (
        "edit before reading",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"1","new_str":"one"}]}"#,
    ),
    (
        "read the file to edit",
        "read_file",
        r#"{"path":"{work}/src/lib.rs","offset":3,"limit":3}"#,
    ),
    (
        "edit one occurrence",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"    1\n","new_str":"    1 + 0\n"}]}"#,
    ),
    (
        "edit with a typo",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"pub fn twoo() -> u32 {","new_str":"x"}]}"#,
    ),
    (
        "edit with other indentation",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"pub fn two() -> u32 {\n  2\n}","new_str":"x"}]}"#,
    ),
    (
        "edit an ambiguous snippet",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"TODO","new_str":"DONE"}]}"#,
    ),
    (
        "edit every occurrence",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"TODO","new_str":"DONE","replace_all":true}]}"#,
    ),
    (
        "edits all or none",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[{"old_str":"DONE: three","new_str":"three"},{"old_str":"nowhere","new_str":"x"}]}"#,
    ),
    (
        "edit with no edits",
        "edit_file",
        r#"{"path":"{work}/src/lib.rs","edits":[]}"#,
    ),
    (
        "create a file by edit",
        "edit_file",
        r#"{"path":"{work}/created.txt","edits":[{"old_str":"","new_str":"created\n"}]}"#,
    ),
    (
        "append after one's own edit",
        "edit_file",
        r#"{"path":"{work}/created.txt","edits":[{"old_str":"","new_str":"appended\n"}]}"#,
    ),
    (
        "edit in a missing folder",
        "edit_file",
        r#"{"path":"{work}/no/such/file.txt","edits":[{"old_str":"","new_str":"x"}]}"#,
    ),
    (
        "read the CRLF file",
        "read_file",
        r#"{"path":"{work}/crlf.txt"}"#,
    ),
    (
        "edit an LF snippet in CRLF",
        "edit_file",
        r#"{"path":"{work}/crlf.txt","edits":[{"old_str":"beta\ngamma","new_str":"x"}]}"#,
    ),
    (
        "edit keeps CRLF",
        "edit_file",
        r#"{"path":"{work}/crlf.txt","edits":[{"old_str":"beta","new_str":"BETA"}]}"#,
    ),
    (
        "edit outside every grant",
        "edit_file",
        r#"{"path":"/etc/hostname","edits":[{"old_str":"","new_str":"x"}]}"#,
    ),
    (
        "write before reading",
        "write_file",
        r#"{"path":"{work}/docs/guide.md","content":"replaced\n"}"#,
    ),
    (
        "read one line",
        "read_file",
        r#"{"path":"{work}/docs/guide.md","offset":3,"limit":1}"#,
    ),
    (
        "write after a partial read",
        "write_file",
        r#"{"path":"{work}/docs/guide.md","content":"replaced\n"}"#,
    ),
    (
        "write a file read before",
        "write_file",
        r#"{"path":"{work}/notes.txt","content":"replaced\n"}"#,
    ),
    (
        "write a new file",
        "write_file",
        r#"{"path":"{work}/docs/new.md","content":"new\n"}"#,
    ),
    (
        "write over a folder",
        "write_file",
        r#"{"path":"{work}/src","content":"x"}"#,
    ),
    (
        "shell lists the folder",
        "shell",
        r#"{"command":"ls","cwd":"{work}"}"#,
    ),
    (
        "shell shows a file",
        "shell",
        r#"{"command":"cat notes.txt","cwd":"{work}"}"#,
    ),
    (
        "shell without a grant",
        "shell",
        r#"{"command":"rm -rf src","cwd":"{work}"}"#,
    ),
    (
        "fetch without a grant",
        "http_fetch",
        r#"{"url":"https://example.org/"}"#,
    ),
    (
        "shell cleans colours and redraws",
        "shell",
        r#"{"command":"printf '\\033[1;31mred\\033[0m plain\\n10%%\\r50%%\\r100%%\\n'","cwd":"{work}"}"#,
    ),
    (
        "shell exits non-zero",
        "shell",
        r#"{"command":"ls no-such-file","cwd":"{work}"}"#,
    ),
    (
        "shell with a shorter timeout",
        "shell",
        r#"{"command":"echo before; sleep 30","cwd":"{work}","timeout_secs":1}"#,
    ),
    (
        "shell with a timeout over the maximum",
        "shell",
        r#"{"command":"echo fast","cwd":"{work}","timeout_secs":100000}"#,
    ),
    (
        "rail: rm -rf of the root",
        "shell",
        r#"{"command":"rm -rf /","cwd":"{work}"}"#,
    ),
    (
        "rail: rm of home inside bash -c",
        "shell",
        r#"{"command":"bash -c 'rm -r -f ~'","cwd":"{work}"}"#,
    ),
    (
        "rail: rm of everything in the granted folder",
        "shell",
        r#"{"command":"sudo rm -fr *","cwd":"{work}"}"#,
    ),
    (
        "rail: a fork bomb",
        "shell",
        r#"{"command":":(){ :|:& };:","cwd":"{work}"}"#,
    ),
    (
        "rail: a command in the background",
        "shell",
        r#"{"command":"sleep 10 &","cwd":"{work}"}"#,
    ),
    (
        "rail: a path word in boxmaker's state",
        "shell",
        r#"{"command":"cat {state}/audit.jsonl","cwd":"{work}"}"#,
    ),
    (
        "rail: a redirection into the grants",
        "shell",
        r#"{"command":"echo x > {config}/grants/more.toml","cwd":"{work}"}"#,
    ),
    (
        "fetch a page as Markdown",
        "http_fetch",
        r#"{"url":"https://127.0.0.1:{port}/page"}"#,
    ),
    (
        "fetch the page in parts",
        "http_fetch",
        r#"{"url":"https://127.0.0.1:{port}/page","max_length":40}"#,
    ),
    (
        "fetch the next part",
        "http_fetch",
        r#"{"url":"https://127.0.0.1:{port}/page","max_length":40,"start_index":40}"#,
    ),
    (
        "fetch plain text",
        "http_fetch",
        r#"{"url":"https://127.0.0.1:{port}/notes.txt"}"#,
    ),
    (
        "fetch a binary type",
        "http_fetch",
        r#"{"url":"https://127.0.0.1:{port}/logo.png"}"#,
    ),
    (
        "fetch a redirect to an ungranted private address",
        "http_fetch",
        r#"{"url":"https://127.0.0.1:{port}/away"}"#,
    ),
    (
        "fetch a host outside the grant",
        "http_fetch",
        r#"{"url":"https://127.0.0.2:{port}/page"}"#,
    ),
    (
        "search the web",
        "web_search",
        r#"{"query":"rust docs","max_results":2}"#,
    ),
    (
        "search for too many results",
        "web_search",
        r#"{"query":"rust docs","max_results":11}"#,
    ),
    (
        "git status of a changed repository",
        "git_status",
        r#"{"path":"{work}/repo"}"#,
    ),
    (
        "git status from a sub-folder",
        "git_status",
        r#"{"path":"{work}/repo/docs"}"#,
    ),
    (
        "git diff of the work tree",
        "git_diff",
        r#"{"path":"{work}/repo"}"#,
    ),
    (
        "git diff of what is staged",
        "git_diff",
        r#"{"path":"{work}/repo","staged":true}"#,
    ),
    (
        "git diff of one path",
        "git_diff",
        r#"{"path":"{work}/repo","paths":["a.txt"]}"#,
    ),
    (
        "git diff with an option as a path",
        "git_diff",
        r#"{"path":"{work}/repo","paths":["--output=/tmp/x"]}"#,
    ),
    (
        "git status outside the grant",
        "git_status",
        r#"{"path":"{work}"}"#,
    ),
    (
        "git clone over https",
        "git_clone",
        r#"{"url":"https://127.0.0.1:{port}/repo.git","path":"{work}/cloned"}"#,
    ),
    (
        "git clone over ssh",
        "git_clone",
        r#"{"url":"git@github.com:example/repo.git","path":"{work}/cloned/ssh"}"#,
    ),
    (
        "git clone of a file URL",
        "git_clone",
        r#"{"url":"file:///etc","path":"{work}/cloned/file"}"#,
    ),
    (
        "git clone outside the grant",
        "git_clone",
        r#"{"url":"https://127.0.0.1:{port}/repo.git","path":"{work}/elsewhere"}"#,
    ),
    (
        "start a job",
        "bash_bg",
        r#"{"command":"echo one; echo two; echo three","cwd":"{work}"}"#,
    ),
    ("tail the ended job", "bash_tail", r#"{"job":1}"#),
    ("tail it again", "bash_tail", r#"{"job":1}"#),
    (
        "start a long job",
        "bash_bg",
        r#"{"command":"echo begun; sleep 30","cwd":"{work}"}"#,
    ),
    ("kill the long job", "bash_kill", r#"{"job":2}"#),
    ("tail the killed job", "bash_tail", r#"{"job":2}"#),
    (
        "tail a job that does not exist",
        "bash_tail",
        r#"{"job":9}"#,
    ),
    (
        "a job in the background of a job",
        "bash_bg",
        r#"{"command":"sleep 5 &","cwd":"{work}"}"#,
    ),
    (
        "a catastrophic job",
        "bash_bg",
        r#"{"command":"rm -rf ~","cwd":"{work}"}"#,
    ),
    (
        "a job no grant covers",
        "bash_bg",
        r#"{"command":"cat notes.txt","cwd":"{work}"}"#,
    ),
    (
        "grep after the edits",
        "grep",
        r#"{"pattern":"DONE|BETA|1 \\+ 0","path":"{work}","output_mode":"content"}"#,
    ),
    (
        "list after the edits",
        "list_files",
        r#"{"path":"{work}","recursive":true}"#,
    ),
];

/// Calls made only after a pause (ms), so what they read no longer depends on timing: a job
/// that prints three lines has ended, a long one has printed its first line.
const PAUSES: &[(&str, u64)] = &[("tail the ended job", 1500), ("kill the long job", 1500)];

/// Folders left out of the final tree: real repositories, whose insides are git's.
const NOT_SHOWN: &[&str] = &["repo/.git", "cloned/.git"];

/// `arguments` with each `{job:LABEL}` written as the id of the job the call labelled LABEL
/// started (a job is numbered by the `bash_bg` call that started it: its place in the list).
fn with_job_ids(arguments: &str) -> String {
    let mut out = arguments.to_string();
    while let Some(at) = out.find("{job:") {
        let end = at + out[at..].find('}').unwrap();
        let label = &out[at + 5..end];
        let index = CALLS.iter().position(|c| c.0 == label).unwrap();
        out.replace_range(at..=end, &(index + 1).to_string());
    }
    out
}

/// Header fields that depend on the machine.
const VOLATILE: &[&str] = &["containment", "duration_ms"];

/// Header fields of one tool that depend on the machine: the size of a clone, `.git` and the
/// sample hooks of this git included.
const VOLATILE_OF: &[(&str, &str)] = &[("git_clone", "bytes")];

/// The broker and the servers its calls reach.
struct Journal {
    broker: BrokerProcess,
    /// The web server's port, written `{port}` in the journal.
    port: u16,
}

fn normalize(text: &str, at: &Journal) -> String {
    text.replace(&at.broker.work.display().to_string(), "{work}")
        .replace(&at.broker.config.display().to_string(), "{config}")
        .replace(&at.broker.state.display().to_string(), "{state}")
        .replace(&format!("127.0.0.1:{}", at.port), "127.0.0.1:{port}")
        .replace(&format!("127.0.0.2:{}", at.port), "127.0.0.2:{port}")
}

/// The web server the `http_fetch` calls reach: a page, plain text, an image and a redirect.
fn web_server(ca: &TestCa) -> TlsServer {
    let server = TlsServer::start(&ca.issue(&["127.0.0.1", "127.0.0.2"])).unwrap();
    server.route(
        "/page",
        TlsResponse::ok(
            "text/html; charset=utf-8",
            "<html><head><title>Parity</title><script>alert(1)</script></head><body>\
             <h1>The parity page</h1><p>Some <b>bold</b> text and a <a href=\"/notes.txt\">link</a>.</p>\
             <ul><li>one</li><li>two</li></ul></body></html>",
        ),
    );
    server.route(
        "/notes.txt",
        TlsResponse::ok("text/plain", "plain text\n  kept as it is\n"),
    );
    server.route(
        "/logo.png",
        TlsResponse::ok("image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
    );
    server.route("/away", TlsResponse::redirect(302, "https://10.0.0.1/"));
    server
}

fn entry(response: &ToolResponse, at: &Journal) -> String {
    match response {
        ToolResponse::Result { content, .. } => {
            let (header, body) = content.split_once('\n').unwrap_or((content, ""));
            let mut header: serde_json::Value = serde_json::from_str(header).unwrap();
            for key in VOLATILE {
                if header.get(key).is_some() {
                    header[key] = "…".into();
                }
            }
            for (tool, key) in VOLATILE_OF {
                if header["tool"] == *tool && header.get(key).is_some() {
                    header[key] = "…".into();
                }
            }
            normalize(&format!("result {header}\n{body}"), at)
        }
        ToolResponse::Failed { message } => normalize(&format!("failed\n{message}"), at),
        ToolResponse::Denied { reason } => {
            format!("denied {reason:?}: {}", reason.model_text())
        }
        other => format!("unexpected {other:?}"),
    }
}

fn final_tree(work: &Path, out: &mut String) {
    let mut paths = Vec::new();
    let mut stack = vec![work.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for item in fs::read_dir(&folder).unwrap() {
            let path = item.unwrap().path();
            if NOT_SHOWN.iter().any(|n| path == work.join(n)) {
                continue;
            }
            if path.is_dir() && !path.is_symlink() {
                stack.push(path.clone());
            }
            paths.push(path);
        }
    }
    paths.sort();
    for path in paths {
        let shown = path.strip_prefix(work).unwrap().display().to_string();
        let meta = fs::symlink_metadata(&path).unwrap();
        if meta.is_symlink() {
            let target = fs::read_link(&path).unwrap();
            let target = target.strip_prefix(work).unwrap_or(&target).display();
            writeln!(out, "{shown} -> {{work}}/{target}").unwrap();
        } else if meta.is_dir() {
            writeln!(out, "{shown}/").unwrap();
        } else {
            let bytes = fs::read(&path).unwrap();
            writeln!(
                out,
                "{shown} ({} bytes)\n{:?}",
                bytes.len(),
                String::from_utf8_lossy(&bytes)
            )
            .unwrap();
        }
    }
}

#[test]
fn the_parity_journal_replays_byte_for_byte() {
    let ca = TestCa::new("boxmaker parity CA");
    let server = web_server(&ca);
    let roots = testkit::temp_dir();
    let ca_file = roots.path().join("ca.pem");
    fs::write(&ca_file, ca.cert_pem()).unwrap();
    let config = format!(
        "{FAST}[web_search]\nprovider = \"searxng\"\nurl = \"{}\"\n",
        searxng()
    );
    let grants = GRANTS.replace("{port}", &server.port().to_string());
    let broker = BrokerProcess::start_with_env(
        &grants,
        &config,
        &[("BOXMAKER_EXTRA_ROOTS", &ca_file.display().to_string())],
    );
    set_up(&broker.work);
    serve_repository(&server, &broker.work, roots.path());
    let at = Journal {
        broker,
        port: server.port(),
    };
    let broker = &at.broker;
    let mut client = AgentClient::open(&broker.socket(), None);
    let mut journal = String::from(
        "# The parity journal\n\nEach call through the real broker on the fixture tree of \
         `tests/all/parity.rs`, its answer, and the final tree. Regenerate with \
         `BOXMAKER_PARITY_UPDATE=1`.\n",
    );
    let tools: std::collections::BTreeSet<&str> = CALLS.iter().map(|c| c.1).collect();
    assert!(CALLS.len() >= 60, "{} calls", CALLS.len());
    assert_eq!(tools.len(), 15, "{tools:?}");
    for (index, (label, tool, arguments)) in CALLS.iter().enumerate() {
        if let Some((_, ms)) = PAUSES.iter().find(|(l, _)| l == label) {
            std::thread::sleep(Duration::from_millis(*ms));
        }
        let arguments = arguments
            .replace("{work}", &broker.work.display().to_string())
            .replace("{config}", &broker.config.display().to_string())
            .replace("{state}", &broker.state.display().to_string())
            .replace("{port}", &at.port.to_string());
        let arguments = with_job_ids(&arguments);
        let response = client
            .call(index as u64 + 1, tool, &arguments)
            .unwrap_or_else(|frame| panic!("call {label}: {frame:?}"));
        write!(
            journal,
            "\n## {} {label}\n\n```\n{tool} {}\n{}\n```\n",
            index + 1,
            normalize(&arguments, &at),
            entry(&response, &at)
        )
        .unwrap();
    }
    journal.push_str("\n## The final tree\n\n```\n");
    final_tree(&broker.work, &mut journal);
    journal.push_str("```\n");
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity/journal.md");
    if std::env::var_os("BOXMAKER_PARITY_UPDATE").is_some() {
        fs::write(&committed, &journal).unwrap();
        return;
    }
    let expected = fs::read_to_string(&committed).unwrap_or_default();
    if expected != journal {
        let actual = committed.with_extension("actual.md");
        fs::write(&actual, &journal).unwrap();
        panic!(
            "the journal differs from {}; the new one is in {} (diff them; regenerate with BOXMAKER_PARITY_UPDATE=1 if the change is deliberate)",
            committed.display(),
            actual.display()
        );
    }
}
