//! One tool as a downstream server lists it: the part a pin covers, its hash, and its input
//! schema compiled to check a call's arguments.

use std::sync::Arc;

use policy::downstream::{definition, definition_hash, read_only_hint};
use proto::ToolSchema;
use serde_json::Value;

use crate::daemon::misfit;

/// Why a call's arguments were not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    /// They do not fit the schema: each misfit, naming its argument (the model can fix it).
    Arguments(String),
    /// The schema itself cannot check anything (the server's problem: the call is refused).
    Schema(String),
}

/// One tool as a downstream server lists it, with the pin of its definition.
pub struct Definition {
    /// Its name on its server.
    pub tool: String,
    /// What the pin covers: name, description, input schema, annotations.
    pub value: Value,
    /// [`definition_hash`] of `value`.
    pub hash: String,
    /// Its input schema, compiled; or why it cannot be used (then its calls are refused).
    validator: Result<Arc<jsonschema::Validator>, String>,
}

impl Definition {
    /// The definition of `tool` as listed, with its annotations if it has any.
    pub fn new(
        tool: &str,
        description: Option<&str>,
        schema: Value,
        annotations: Option<&Value>,
    ) -> Definition {
        let value = definition(tool, description, &schema, annotations);
        // Remote references are never fetched: this build of the validator cannot.
        let validator = jsonschema::validator_for(&schema)
            .map(Arc::new)
            .map_err(|e| e.to_string());
        Definition {
            tool: tool.to_string(),
            hash: definition_hash(&value),
            value,
            validator,
        }
    }

    /// Whether its annotations say it only reads (`readOnlyHint`), which a grant with
    /// `read_only = "hint"` honours.
    pub fn read_only_hint(&self) -> bool {
        read_only_hint(&self.value)
    }

    /// Whether `arguments` fit the tool's input schema: else each misfit, naming its argument
    /// ([`crate::daemon::misfit`]), or why the schema cannot check them.
    pub fn check(&self, arguments: &Value) -> Result<(), Unfit> {
        let validator = self.validator.as_ref().map_err(|e| {
            Unfit::Schema(format!(
                "the input schema of {} cannot be used to check arguments: {e}",
                self.tool
            ))
        })?;
        let schema = self.value.get("inputSchema").unwrap_or(&Value::Null);
        let found = misfit::misfits(&self.tool, validator, schema, arguments, false);
        if found.is_empty() {
            Ok(())
        } else {
            Err(Unfit::Arguments(misfit::message(&found)))
        }
    }

    /// It as the owner sees it: indented JSON with sorted keys.
    pub(super) fn view(&self, server: &str) -> proto::DownstreamTool {
        let sorted: Value = serde_json::from_str(&policy::downstream::canonical(&self.value))
            .unwrap_or(Value::Null);
        proto::DownstreamTool {
            name: format!("{server}.{}", self.tool),
            hash: self.hash.clone(),
            definition: serde_json::to_string_pretty(&sorted).unwrap_or_default(),
        }
    }

    /// Its entry in a session's catalog, as `server.tool`.
    pub(super) fn schema(&self, server: &str) -> ToolSchema {
        ToolSchema {
            name: format!("{server}.{}", self.tool),
            description: self
                .value
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            parameters: self
                .value
                .get("inputSchema")
                .cloned()
                .unwrap_or(Value::Null),
        }
    }
}
