//! `bx grants check --json` and `bx grants pin` with no broker running: the grant files are
//! read all the same, the downstream part says the broker is not running, and nothing is
//! pinned (exit 3) since only the broker knows the servers' definitions.

use std::fs;

use serde_json::Value;

use super::bx_in;

#[test]
fn check_json_names_each_problem_with_its_file_and_line_and_pin_needs_the_broker() {
    let root = testkit::temp_dir();
    let (config, state, runtime) = (
        root.path().join("c"),
        root.path().join("s"),
        root.path().join("r"),
    );
    let grants = config.join("grants");
    fs::create_dir_all(&grants).unwrap();
    let file = grants.join("git.toml");
    let text = "# git\n[[grant]]\nid = \"git-read\"\ntool = \"git.*\"\nread_only = \"hint\"\n";
    fs::write(&file, text).unwrap();

    let ran = bx_in(&config, &state, &runtime, &["grants", "check", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let checked: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(checked["ok"], true, "{checked}");
    assert_eq!(checked["grants"], 1);
    assert_eq!(checked["problems"], serde_json::json!([]));
    assert_eq!(checked["downstream"]["broker"], "not_running", "{checked}");
    assert_eq!(checked["downstream"]["servers"], serde_json::json!([]));

    let ran = bx_in(&config, &state, &runtime, &["grants", "pin", "git.*"]);
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    assert!(ran.stderr.contains("nothing pinned"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("no broker is running"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("Only the running broker starts the downstream servers"),
        "{}",
        ran.stderr
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), text);

    fs::write(
        grants.join("bad.toml"),
        "[[grant]]\nid = \"b\"\ntool = \"git.*\"\nread_only = \"yes\"\n",
    )
    .unwrap();
    let ran = bx_in(&config, &state, &runtime, &["grants", "check", "--json"]);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let checked: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(checked["ok"], false);
    assert_eq!(checked["grants"], 0);
    assert_eq!(checked["downstream"], Value::Null);
    let problem = &checked["problems"][0];
    assert!(
        problem["file"].as_str().unwrap().ends_with("bad.toml"),
        "{problem}"
    );
    assert_eq!(problem["line"], 4, "{problem}");
    assert!(
        problem["message"]
            .as_str()
            .unwrap()
            .contains("read_only must be true"),
        "{problem}"
    );
    // With a problem in the folder nothing is pinned either.
    let ran = bx_in(&config, &state, &runtime, &["grants", "pin", "git.*"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("fix them first"), "{}", ran.stderr);
}
