//! `bx grants pin` and `bx grants check --json` against a running broker serving the probe:
//! pins are written into the grant that names each tool, in place, after its definition is
//! shown; what cannot be pinned is refused with nothing written; scripts read the same facts.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::Value;

use super::{Probe, bx, catalog, content, owner_view};

/// The probe's tool grants: echo and read named, relabel denied, the rest named by none.
const TOOLS: &str = r#"
# Echo and read: pinned by `bx grants pin`.
[[grant]]
id = "probe-some"   # what the agent may use
tool = ["probe.echo", "probe.read"]
on_untrusted = "allow"

# Never relabel.
[[grant]]
id = "no-relabel"
tool = "probe.relabel"
deny = true
"#;

fn hash_of(probe: &Probe, tool: &str) -> String {
    let (servers, _) = owner_view(&probe.broker, &[]);
    servers[0]
        .tools
        .iter()
        .find(|t| t.name == tool)
        .unwrap_or_else(|| panic!("no {tool}"))
        .hash
        .clone()
}

/// Waits until a session's catalog lists `tool`: the broker has loaded the pin just written
/// (the grants folder is reloaded when it changes; a pin's temporary file is a change too, so
/// counting reloads would not say which one held the pin).
fn until_listed(probe: &Probe, tool: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut client = probe.client();
    loop {
        let listed: Vec<String> = catalog(&mut client).into_iter().map(|t| t.name).collect();
        if listed.iter().any(|n| n == tool) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{tool} never listed: {listed:?}\n{}",
            probe.broker.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bx_grants_pin_shows_each_definition_then_writes_its_pin_into_the_grant_in_place() {
    let probe = Probe::start(TOOLS);
    let file = probe.broker.config.join("grants/grants.toml");
    let before = std::fs::read_to_string(&file).unwrap();

    let (code, out, err) = bx(&probe.broker, &["grants", "pin", "probe.echo"]);
    assert_eq!(code, 0, "{out}{err}");
    let shown = out
        .find("probe.echo: its definition as its server lists it now:")
        .unwrap_or_else(|| panic!("{out}"));
    let pinned = out
        .find("pinned probe.echo in grant probe-some")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(shown < pinned, "the definition comes first: {out}");
    assert!(
        out.contains("    |   \"description\": \"Echoes its text.\""),
        "{out}"
    );
    let echo = hash_of(&probe, "probe.echo");
    let after = std::fs::read_to_string(&file).unwrap();
    // Only the grant's pins changed: every comment and line of the file is kept.
    assert_eq!(
        after,
        before.replace(
            "on_untrusted = \"allow\"\n",
            &format!("on_untrusted = \"allow\"\npins = {{ \"probe.echo\" = \"{echo}\" }}\n")
        )
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    until_listed(&probe, "probe.echo");
    let mut client = probe.client();
    let listed: Vec<String> = catalog(&mut client).into_iter().map(|t| t.name).collect();
    assert!(listed.contains(&"probe.echo".to_string()), "{listed:?}");
    assert!(!listed.contains(&"probe.read".to_string()), "{listed:?}");

    // A denied tool, one no grant names, and a name no server lists are refused; so is a
    // request holding any of them, and the file is left as it was.
    let cases: [(&[&str], &str); 4] = [
        (
            &["probe.relabel"],
            "probe.relabel is denied by grant no-relabel",
        ),
        (&["probe.connect"], "no grant names probe.connect"),
        (
            &["probe.nothing"],
            "no downstream tool matches probe.nothing",
        ),
        (
            &["probe.read", "probe.relabel"],
            "denied by grant no-relabel",
        ),
    ];
    for (tools, says) in cases {
        let mut args = vec!["grants", "pin"];
        args.extend_from_slice(tools);
        let (code, out, err) = bx(&probe.broker, &args);
        assert_eq!(code, 1, "{tools:?}: {out}{err}");
        assert!(err.contains(says), "{tools:?}: {err}");
        assert!(err.contains("nothing pinned"), "{tools:?}: {err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), after, "{tools:?}");
    }
    let (code, _, err) = bx(&probe.broker, &["grants", "pin", "read_file"]);
    assert_eq!(code, 2, "{err}");

    // A glob pins what a grant names and says what it leaves out.
    let (code, out, err) = bx(&probe.broker, &["grants", "pin", "probe.*"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("probe.echo: already pinned by grant probe-some"),
        "{out}"
    );
    assert!(
        out.contains("pinned probe.read in grant probe-some"),
        "{out}"
    );
    assert!(
        out.contains("left out of probe.*: probe.relabel is denied by grant no-relabel"),
        "{out}"
    );
    assert!(
        out.contains("left out of probe.*: no grant names probe.misbehave"),
        "{out}"
    );
    let read = hash_of(&probe, "probe.read");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(&format!(
            "pins = {{ \"probe.echo\" = \"{echo}\", \"probe.read\" = \"{read}\" }}"
        )),
        "{text}"
    );
    assert!(text.contains("# Never relabel."), "{text}");
    let (code, out) = super::grants_check(&probe.broker);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("probe.read: pinned by grant probe-some"),
        "{out}"
    );
}

#[test]
fn pinning_a_changed_tool_shows_the_difference_escaped_then_pins_the_new_definition() {
    let probe = Probe::start(
        "[[grant]]\nid = \"probe-tools\"\ntool = \"probe.*\"\non_untrusted = \"allow\"\n",
    );
    let (code, out, err) = bx(&probe.broker, &["grants", "pin", "probe.*"]);
    assert_eq!(code, 0, "{out}{err}");
    until_listed(&probe, "probe.relabel");
    let mut client = probe.client();
    // A bidirectional control in the new description: shown escaped, never raw.
    let relabel = r#"{"text":"Echoes its text.\u202e and more"}"#;
    assert!(content(&client.call(1, "probe.relabel", relabel).unwrap()).contains("relabelled"));
    let (code, out) = super::grants_check(&probe.broker);
    assert_eq!(code, 1, "{out}");

    // The session's instance lists the new definition, the broker's own the old: a grant
    // pins one definition, so the owner names which.
    let (code, out, err) = bx(&probe.broker, &["grants", "pin", "probe.echo"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("probe.echo has 2 definitions now"), "{err}");
    let (servers, _) = owner_view(&probe.broker, &[]);
    let new = servers[0]
        .tools
        .iter()
        .find(|t| t.name == "probe.echo" && t.definition.contains("and more"))
        .unwrap_or_else(|| panic!("{servers:?}"))
        .hash
        .clone();
    let chosen = format!("probe.echo@{}", &new[..12]);
    let (code, out, err) = bx(&probe.broker, &["grants", "pin", &chosen]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("probe.echo: changed since grant probe-tools pinned it"),
        "{out}"
    );
    assert!(
        out.contains("-  \"description\": \"Echoes its text.\","),
        "{out}"
    );
    assert!(
        out.contains("+  \"description\": \"Echoes its text."),
        "{out}"
    );
    assert!(
        !out.contains('\u{202e}'),
        "a raw bidi control reached the terminal: {out}"
    );
    let text = std::fs::read_to_string(probe.broker.config.join("grants/grants.toml")).unwrap();
    assert!(
        text.contains(&format!("\"probe.echo\" = \"{new}\"")),
        "{text}"
    );
    // Now the session's definition is the pinned one, and the broker's own has changed.
    let (code, out) = super::grants_check(&probe.broker);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("probe.echo: pinned by grant probe-tools"),
        "{out}"
    );
    assert!(
        out.contains("probe.echo: CHANGED since grant probe-tools pinned it"),
        "{out}"
    );
    let (code, _, err) = bx(&probe.broker, &["grants", "pin", "probe.echo@12"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn bx_grants_check_json_gives_scripts_each_tools_status_and_pins() {
    let probe = Probe::start(
        "[[grant]]\nid = \"probe-some\"\ntool = [\"probe.echo\", \"probe.read\", \"probe.relabel\"]\non_untrusted = \"allow\"\n\n[[grant]]\nid = \"no-misbehave\"\ntool = \"probe.misbehave\"\ndeny = true\n",
    );
    let (code, out, err) = bx(
        &probe.broker,
        &["grants", "pin", "probe.echo", "probe.relabel"],
    );
    assert_eq!(code, 0, "{out}{err}");
    until_listed(&probe, "probe.relabel");
    let (code, out, err) = bx(&probe.broker, &["grants", "check", "--json"]);
    // probe.read is named and not pinned: not ok.
    assert_eq!(code, 1, "{out}{err}");
    let checked: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(checked["ok"], false, "{checked}");
    assert_eq!(checked["problems"], serde_json::json!([]));
    assert!(checked["folder"].as_str().unwrap().ends_with("grants"));
    let downstream = &checked["downstream"];
    assert_eq!(downstream["broker"], "running", "{downstream}");
    assert_eq!(downstream["unpinned"], 1, "{downstream}");
    assert_eq!(downstream["changed"], 0, "{downstream}");
    let server = &downstream["servers"][0];
    assert_eq!(server["name"], "probe");
    assert_eq!(server["error"], Value::Null);
    let tool = |name: &str| {
        server["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {server}"))
            .clone()
    };
    let echo = tool("probe.echo");
    let hash = hash_of(&probe, "probe.echo");
    assert_eq!(echo["status"], "pinned", "{echo}");
    assert_eq!(echo["grant"], "probe-some");
    assert_eq!(echo["hash"], hash.as_str());
    assert_eq!(echo["pinned"], hash.as_str());
    assert_eq!(echo["read_only"], false);
    assert_eq!(echo["definition"]["description"], "Echoes its text.");
    let read = tool("probe.read");
    assert_eq!(read["status"], "unpinned", "{read}");
    assert_eq!(read["grant"], "probe-some");
    assert_eq!(read["pinned"], Value::Null);
    assert_eq!(read["definition"]["annotations"]["readOnlyHint"], true);
    assert_eq!(tool("probe.misbehave")["status"], "denied");
    assert_eq!(tool("probe.misbehave")["grant"], "no-misbehave");
    assert_eq!(tool("probe.connect")["status"], "ungranted");
    assert_eq!(tool("probe.connect")["grant"], Value::Null);

    // A changed tool: both definitions and both pins.
    let mut client = probe.client();
    let relabel = r#"{"text":"Echoes, changed."}"#;
    assert!(content(&client.call(1, "probe.relabel", relabel).unwrap()).contains("relabelled"));
    let (_, out, _) = bx(&probe.broker, &["grants", "check", "--json"]);
    let checked: Value = serde_json::from_str(&out).unwrap();
    // The session's instance lists the changed definition beside the broker's own.
    let echo = checked["downstream"]["servers"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "probe.echo" && t["status"] == "changed")
        .unwrap_or_else(|| panic!("{checked}"))
        .clone();
    assert_eq!(echo["status"], "changed", "{echo}");
    assert_eq!(echo["pinned"], hash.as_str());
    assert_ne!(echo["hash"], hash.as_str());
    assert_eq!(echo["definition"]["description"], "Echoes, changed.");
    assert_eq!(echo["pinned_definition"]["description"], "Echoes its text.");
    assert_eq!(checked["downstream"]["changed"], 1);
}
