//! A downstream server whose program cannot run in its box because of a symbolic link: a
//! venv-like folder whose `bin/python` links to an interpreter outside the server's
//! `read_only` folders. The owner is told the link, its target, and the folder to add; with
//! that folder added, the same program starts.

use std::os::unix::fs::symlink;
use std::path::Path;

use testkit::BrokerProcess;

use super::{PROBE, owner_view, sdk_venv};

/// A broker serving the probe as server `linked`, run by `python` with `read_only`.
fn linked_broker(python: &Path, script: &Path, read_only: &[String]) -> BrokerProcess {
    let config = format!(
        "{}\n[[mcp.servers]]\nname = \"linked\"\ncommand = [{:?}, {:?}]\nread_only = {:?}\nstart_ms = 30000\n",
        super::super::FAST,
        python.display().to_string(),
        script.display().to_string(),
        read_only,
    );
    let grants = "[[grant]]\nid = \"linked-box\"\nserver = \"linked\"\npaths = [\"{work}\"]\n";
    BrokerProcess::start(grants, &config)
}

#[test]
fn a_program_behind_a_link_the_box_cannot_follow_is_named_with_the_link_and_its_target() {
    let dir = testkit::temp_dir();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("probe.py"), PROBE).unwrap();
    // A venv made elsewhere and linked here, as `python -m venv` links to its interpreter:
    // its configuration, its libraries and its python, each a link into the SDK's venv.
    let sdk = sdk_venv();
    let venv = root.join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::copy(sdk.join("pyvenv.cfg"), venv.join("pyvenv.cfg")).unwrap();
    symlink(sdk.join("lib"), venv.join("lib")).unwrap();
    let python = venv.join("bin/python");
    symlink(sdk.join("bin/python"), &python).unwrap();
    let script = root.join("probe.py");

    let own = vec![venv.display().to_string(), root.display().to_string()];
    let broker = linked_broker(&python, &script, &own);
    let (servers, _) = owner_view(&broker, &[]);
    let error = servers[0]
        .error
        .clone()
        .unwrap_or_else(|| panic!("it started: {servers:?}"));
    assert!(
        error.contains(&format!(
            "its program goes through {}, a symbolic link to {}, which its box does not see",
            python.display(),
            sdk.join("bin/python").display()
        )),
        "{error}"
    );
    assert!(
        error.contains(&format!(
            "add {:?} to read_only of [[mcp.servers]] linked in brokerd.toml",
            sdk.display().to_string()
        )),
        "{error}"
    );
    // `bx grants check` shows the owner the same sentence.
    let (_, out) = super::grants_check(&broker);
    assert!(out.contains("which its box does not see"), "{out}");
    drop(broker);

    // The venv's folders and the interpreter's added: the same program starts.
    let mut read_only = own;
    read_only.extend(testkit::python::python_folders(&sdk));
    let broker = linked_broker(&python, &script, &read_only);
    let (servers, _) = owner_view(&broker, &[]);
    assert_eq!(servers[0].error, None, "{}", broker.log());
    assert!(
        servers[0].tools.iter().any(|t| t.name == "linked.echo"),
        "{servers:?}"
    );
}
