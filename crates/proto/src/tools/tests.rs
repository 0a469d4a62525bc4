//! The table agrees with the schemas and the seeds.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

fn properties(tool: ToolName) -> serde_json::Map<String, Value> {
    tool.schema().parameters["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn every_tool_has_a_row_named_as_its_schema_and_parse_finds_it_by_that_name() {
    let mut names = BTreeSet::new();
    for tool in ToolName::EVERY {
        assert_eq!(tool.schema().name, tool.as_str(), "{tool:?}");
        assert_eq!(ToolName::parse(tool.as_str()), Some(tool));
        assert!(names.insert(tool.as_str()), "{} twice", tool.as_str());
    }
    assert_eq!(ToolName::parse("server.tool"), None);
    assert_eq!(ToolName::parse("Read_File"), None);
    assert_eq!(
        ToolName::EVERY.to_vec(),
        [
            ToolName::KNOWN.as_slice(),
            ToolName::JOB_COMPANIONS.as_slice()
        ]
        .concat()
    );
}

#[test]
fn each_tools_roles_name_exactly_its_schemas_properties_in_their_order() {
    for tool in ToolName::EVERY {
        let from_schema: Vec<String> = properties(tool).keys().cloned().collect();
        let from_roles: Vec<String> = tool
            .facts()
            .args
            .iter()
            .map(|a| a.name.to_string())
            .collect();
        assert_eq!(from_roles, from_schema, "{}", tool.as_str());
    }
}

/// What a property's description says it holds, read from the schema's own words.
fn described(description: &str) -> Option<Role> {
    if description.starts_with("The absolute path")
        || description.contains("files or folders, relative to")
    {
        Some(Role::Path)
    } else if description.contains("URL") {
        Some(Role::Url)
    } else if description.contains("command line") {
        Some(Role::Command)
    } else {
        None
    }
}

#[test]
fn every_path_url_and_command_the_schemas_describe_has_that_role_and_no_other_argument_does() {
    for tool in ToolName::EVERY {
        let facts = tool.facts();
        for (name, spec) in properties(tool) {
            let description = spec["description"].as_str().unwrap_or_default();
            let role = facts.role(&name);
            match described(description) {
                Some(said) => assert_eq!(role, Some(said), "{}.{name}", tool.as_str()),
                None => assert!(
                    !matches!(role, Some(Role::Path | Role::Url | Role::Command)),
                    "{}.{name} is {role:?} but its description says nothing of it",
                    tool.as_str()
                ),
            }
        }
    }
}

#[test]
fn a_target_path_is_a_path_argument_the_schema_requires() {
    for tool in ToolName::EVERY {
        let Some(target) = tool.builtin().target_path else {
            continue;
        };
        assert_eq!(
            tool.facts().role(target),
            Some(Role::Path),
            "{}",
            tool.as_str()
        );
        let required = &tool.schema().parameters["required"];
        assert!(
            required
                .as_array()
                .is_some_and(|r| r.iter().any(|n| n == target)),
            "{}",
            tool.as_str()
        );
    }
}

#[test]
fn the_side_effect_classes_keep_the_tools_that_had_side_effects() {
    use ToolName::*;
    let had = [
        WriteFile, EditFile, Shell, HttpFetch, Consult, WebSearch, GitClone, BashBg, BashKill,
        Memory, Delegate,
    ];
    for tool in ToolName::EVERY {
        assert_eq!(
            tool.has_side_effects(),
            had.contains(&tool),
            "{}",
            tool.as_str()
        );
    }
    let outbound: Vec<ToolName> = ToolName::EVERY
        .into_iter()
        .filter(|t| t.facts().effect == Effect::Outbound)
        .collect();
    assert_eq!(outbound, [HttpFetch, WebSearch, GitClone, Consult]);
}

#[test]
fn the_hints_agree_with_the_side_effect_class() {
    for tool in ToolName::EVERY {
        let facts = tool.facts();
        if facts.effect == Effect::Read {
            assert!(
                facts.hints.read_only && !facts.hints.destructive,
                "{}",
                tool.as_str()
            );
        }
        if facts.effect == Effect::Outbound {
            assert!(facts.hints.open_world, "{}", tool.as_str());
        }
        if facts.effect == Effect::LocalWrite {
            assert!(!facts.hints.read_only, "{}", tool.as_str());
        }
    }
}

#[test]
fn results_default_to_seed_001s_labels_and_outside_text_is_always_untrusted() {
    // Seed 001: a grant's results are untrusted unless it says otherwise; grants default to
    // private.
    assert_eq!(GRANT_DEFAULT_LABELS.untrusted, Untrusted::UnlessGranted);
    assert_eq!(GRANT_DEFAULT_LABELS.class, Class::Private);
    let always: Vec<ToolName> = ToolName::EVERY
        .into_iter()
        .filter(|t| t.always_untrusted())
        .collect();
    assert_eq!(
        always,
        [ToolName::WebSearch, ToolName::GitClone, ToolName::Consult]
    );
    for tool in ToolName::EVERY {
        assert_eq!(
            tool.facts().labels.class,
            Class::Private,
            "{}",
            tool.as_str()
        );
    }
}

#[test]
fn the_seeds_four_broker_tools_keep_their_pinned_texts() {
    // Seed M3a/16's table of the four schemas, copied from the seed.
    let seed = [
        (
            ToolName::ReadFile,
            "Read a text file. Needs a grant from the owner for the path.",
            &[("path", "The absolute path of the file.")][..],
            &["path"][..],
        ),
        (
            ToolName::WriteFile,
            "Write a text file, replacing it. Needs a grant from the owner for the path.",
            &[
                ("path", "The absolute path of the file."),
                ("content", "The whole new content of the file."),
            ][..],
            &["path", "content"][..],
        ),
        (
            ToolName::Shell,
            "Run a shell command in a sandbox. Needs a grant from the owner.",
            &[
                ("command", "The command line to run."),
                ("cwd", "The absolute path of the directory to run it in."),
            ][..],
            &["command"][..],
        ),
        (
            ToolName::HttpFetch,
            "Fetch an https URL. Needs a grant from the owner for the host.",
            &[("url", "The URL. It must start with https://.")][..],
            &["url"][..],
        ),
    ];
    for (tool, description, props, required) in seed {
        let schema = tool.schema();
        assert_eq!(schema.description, description);
        for (name, text) in props {
            let spec = &schema.parameters["properties"][name];
            assert_eq!(spec["type"], "string", "{}.{name}", tool.as_str());
            assert_eq!(spec["description"], *text, "{}.{name}", tool.as_str());
        }
        assert_eq!(schema.parameters["required"], serde_json::json!(required));
    }
    let seed_shell = serde_json::to_string(&schemas::shell_schema()).unwrap_or_default();
    assert_eq!(
        seed_shell,
        r#"{"name":"shell","description":"Run a shell command in a sandbox. Needs a grant from the owner.","parameters":{"type":"object","properties":{"command":{"type":"string","description":"The command line to run."},"cwd":{"type":"string","description":"The absolute path of the directory to run it in."}},"required":["command"]}}"#
    );
}

#[test]
fn the_time_limit_buckets_are_the_brokers_configured_limits() {
    use TimeLimit as L;
    use ToolName::*;
    let expected = [
        (ReadFile, L::ReadFile),
        (ListFiles, L::ReadFile),
        (Glob, L::ReadFile),
        (Grep, L::ReadFile),
        (WriteFile, L::WriteFile),
        (EditFile, L::WriteFile),
        (Shell, L::Shell),
        (HttpFetch, L::HttpFetch),
        (WebSearch, L::WebSearch),
        (Consult, L::Consult),
        (Recall, L::Memory),
        (Memory, L::Memory),
        (AskMemory, L::Memory),
        (Ask, L::Approval),
        (Delegate, L::Approval),
        (GitStatus, L::Git),
        (GitDiff, L::Git),
        (GitClone, L::GitClone),
        (BashBg, L::Shell),
        (BashTail, L::Shell),
        (BashKill, L::Shell),
    ];
    assert_eq!(expected.len(), ToolName::EVERY.len());
    for (tool, limit) in expected {
        assert_eq!(tool.facts().time_limit, limit, "{}", tool.as_str());
    }
}

#[test]
fn where_a_tool_runs_and_who_grants_it() {
    for tool in ToolName::EVERY {
        let row = tool.builtin();
        assert_eq!(
            row.granted_with.is_some(),
            ToolName::JOB_COMPANIONS.contains(&tool),
            "{}",
            tool.as_str()
        );
        assert_eq!(tool.granted_by().granted_by(), tool.granted_by());
        if tool.is_job() {
            assert_eq!(tool.granted_by(), ToolName::BashBg);
        }
    }
    let memory: Vec<ToolName> = ToolName::EVERY
        .into_iter()
        .filter(|t| t.is_memory())
        .collect();
    assert_eq!(
        memory,
        [ToolName::Recall, ToolName::Memory, ToolName::AskMemory]
    );
    assert!(ToolName::Shell.runs_commands() && ToolName::BashBg.runs_commands());
    assert!(ToolName::HttpFetch.fetches_urls() && ToolName::GitClone.fetches_urls());
    assert!(!ToolName::Shell.is_path_tool() && ToolName::GitClone.is_path_tool());
}
