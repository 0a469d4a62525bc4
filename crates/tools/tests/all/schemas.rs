//! Each tool's hand-written schema and its args struct agree exactly, and the seed schema functions
//! (the texts of seed M3a/16, `toolport`'s, which loopd re-exports) are these schemas.

use proto::ToolSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// Checks that `T` accepts an object with every property of `schema` (all strings here),
/// refuses one without a required property, refuses one with an extra property, and accepts
/// one without each optional property.
fn accepts_exactly<T: DeserializeOwned>(schema: &ToolSchema) {
    let properties = schema.parameters["properties"].as_object().unwrap();
    let required: Vec<&str> = schema.parameters["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let full: Map<String, Value> = properties
        .iter()
        .map(|(name, spec)| {
            assert!(spec["description"].is_string(), "{}.{name}", schema.name);
            (name.clone(), sample(spec))
        })
        .collect();
    let parse =
        |object: &Map<String, Value>| serde_json::from_value::<T>(Value::Object(object.clone()));
    assert!(
        parse(&full).is_ok(),
        "{} refuses all its properties",
        schema.name
    );
    for name in properties.keys() {
        let mut without = full.clone();
        without.remove(name);
        let is_required = required.contains(&name.as_str());
        let refusal = parse(&without).err().map(|e| e.to_string());
        if is_required {
            assert!(
                refusal
                    .as_ref()
                    .is_some_and(|e| e.starts_with(&format!("missing field `{name}`"))),
                "{} without {name}: {refusal:?}",
                schema.name
            );
        } else {
            assert_eq!(refusal, None, "{} without {name}", schema.name);
        }
    }
    let mut extra = full.clone();
    extra.insert("unexpected".into(), json!("x"));
    let refusal = parse(&extra).err().map(|e| e.to_string());
    assert!(
        refusal
            .as_ref()
            .is_some_and(|e| e.starts_with("unknown field `unexpected`")),
        "{} accepts an unknown property: {refusal:?}",
        schema.name
    );
}

/// A valid value for a property `spec`.
fn sample(spec: &Value) -> Value {
    if let Some(first) = spec["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match spec["type"].as_str().unwrap() {
        "string" => json!("/x"),
        "boolean" => json!(true),
        "integer" => json!(1),
        "array" if spec["items"]["type"] == "string" => json!(["x"]),
        "array" => {
            let item = &spec["items"];
            let object: Map<String, Value> = item["properties"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, spec)| (name.clone(), sample(spec)))
                .collect();
            json!([object])
        }
        other => panic!("no sample for type {other}"),
    }
}

/// Whether `wide` has `narrow`'s name, description and properties (each the same), and only
/// optional properties besides: a model that knows the seed's schema calls it unchanged.
fn is_superset(wide: &ToolSchema, narrow: &ToolSchema) -> bool {
    let wide_props = wide.parameters["properties"].as_object().unwrap();
    let narrow_props = narrow.parameters["properties"].as_object().unwrap();
    wide.name == narrow.name
        && wide.description == narrow.description
        && narrow_props
            .iter()
            .all(|(k, v)| wide_props.get(k) == Some(v))
        && wide.parameters["required"] == narrow.parameters["required"]
}

#[test]
fn the_brokers_read_file_schema_is_a_superset_of_the_seeds() {
    let broker = tools::fs::broker_read_file_schema();
    assert!(is_superset(&broker, &toolport::read_file_schema()));
    assert_ne!(broker, toolport::read_file_schema());
    accepts_exactly::<tools::fs::ReadFileArgs>(&broker);
}

#[test]
fn the_brokers_shell_schema_is_a_superset_of_the_seeds() {
    let broker = tools::shell::broker_shell_schema();
    assert!(is_superset(&broker, &toolport::shell_schema()));
    assert!(broker.parameters["properties"]["timeout_secs"].is_object());
    accepts_exactly::<tools::shell::ShellArgs>(&broker);
}

#[test]
fn the_brokers_http_fetch_schema_is_a_superset_of_the_seeds() {
    let broker = nettools::web::broker_http_fetch_schema();
    assert!(is_superset(&broker, &toolport::http_fetch_schema()));
    assert!(broker.parameters["properties"]["max_length"].is_object());
    assert!(broker.parameters["properties"]["start_index"].is_object());
    accepts_exactly::<nettools::web::HttpFetchArgs>(&broker);
}

#[test]
fn the_coding_tools_args_accept_exactly_their_schemas() {
    accepts_exactly::<nettools::web::web_search::WebSearchArgs>(
        &nettools::web::web_search::web_search_schema(),
    );
    accepts_exactly::<tools::fs::EditFileArgs>(&tools::fs::edit_file_schema());
    accepts_exactly::<tools::search::ListFilesArgs>(&tools::search::list_files_schema());
    accepts_exactly::<tools::search::GlobArgs>(&tools::search::glob_schema());
    accepts_exactly::<tools::search::GrepArgs>(&tools::search::grep_schema());
}

#[test]
fn the_git_tools_args_accept_exactly_their_schemas() {
    accepts_exactly::<tools::git::GitStatusArgs>(&tools::git::git_status_schema());
    accepts_exactly::<tools::git::GitDiffArgs>(&tools::git::git_diff_schema());
    accepts_exactly::<tools::git::GitCloneArgs>(&tools::git::git_clone_schema());
}

#[test]
fn the_job_tools_args_accept_exactly_their_schemas() {
    accepts_exactly::<tools::jobs::BashBgArgs>(&tools::jobs::bash_bg_schema());
    accepts_exactly::<tools::jobs::BashTailArgs>(&tools::jobs::bash_tail_schema());
    accepts_exactly::<tools::jobs::BashKillArgs>(&tools::jobs::bash_kill_schema());
    // bash_bg takes shell's command and cwd with the same words, and no time limit.
    let bg = tools::jobs::bash_bg_schema();
    let shell = tools::shell::shell_schema();
    assert_eq!(bg.parameters["properties"], shell.parameters["properties"]);
}

#[test]
fn each_args_struct_accepts_exactly_its_schemas_properties() {
    accepts_exactly::<tools::fs::ReadFileArgs>(&tools::fs::read_file_schema());
    accepts_exactly::<tools::fs::WriteFileArgs>(&tools::fs::write_file_schema());
    accepts_exactly::<tools::shell::ShellArgs>(&tools::shell::shell_schema());
    accepts_exactly::<nettools::web::HttpFetchArgs>(&nettools::web::http_fetch_schema());
}

#[test]
fn the_seed_schema_functions_are_these_schemas() {
    assert_eq!(toolport::read_file_schema(), tools::fs::read_file_schema());
    assert_eq!(
        toolport::write_file_schema(),
        tools::fs::write_file_schema()
    );
    assert_eq!(toolport::shell_schema(), tools::shell::shell_schema());
    assert_eq!(
        toolport::http_fetch_schema(),
        nettools::web::http_fetch_schema()
    );
}

#[test]
fn the_schemas_serialize_byte_for_byte_like_the_seeds() {
    let ours = [
        tools::fs::read_file_schema(),
        tools::fs::write_file_schema(),
        tools::shell::shell_schema(),
        nettools::web::http_fetch_schema(),
    ];
    let theirs = [
        toolport::read_file_schema(),
        toolport::write_file_schema(),
        toolport::shell_schema(),
        toolport::http_fetch_schema(),
    ];
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(
            serde_json::to_string(a).unwrap(),
            serde_json::to_string(b).unwrap()
        );
    }
}
