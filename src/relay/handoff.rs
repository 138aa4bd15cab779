//! What a delivery hands over besides its text, and what it asks back: the artifacts the sender
//! gave (`sessions_send` `artifacts`), put in the target's message, and the JSON Schema its
//! answer must match (`expect`), checked here, with the one second chance a failed answer gets.
//!
//! Inputs go inline when they are text and small, by reference otherwise
//! ([`crate::engine::artifact_line`]).

use serde::Serialize;
use serde_json::Value;

use crate::backend::Usage;
use crate::engine::{Engine, InlineBudget, artifact_line};
use crate::store::Delivery;

/// An `expect` that is not a JSON Schema baton can check against.
#[derive(Debug, thiserror::Error)]
#[error(
    "`expect` is not a usable JSON Schema: {0}; give a schema such as \
     {{\"type\":\"object\",\"required\":[\"answer\"]}} (a `$ref` may only point inside it)"
)]
pub struct SchemaError(String);

/// Whether `schema` compiles, so a send with a broken one is refused before anything runs.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    jsonschema::validator_for(schema)
        .map(drop)
        .map_err(|err| SchemaError(err.to_string()))
}

/// What a delivery's run produced besides its text, kept on the delivery (`result`) and shown
/// in the sender's tool result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(super) struct Report {
    /// The answer parsed as JSON, when it matched `expect`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why the answer did not match `expect` (the second try's errors).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Tokens the target's turns used.
    pub usage: Option<Usage>,
    /// How many tools the target called.
    pub tool_calls: usize,
}

/// The target's message: the sender's words, the artifacts it handed over and, with `expect`,
/// what shape the answer must take.
pub(super) async fn brief(engine: &Engine, d: &Delivery) -> String {
    let mut text = super::from_sender(d);
    if !d.artifacts_in.is_empty() {
        text.push_str("\n\nArtifacts handed to you:");
        let mut budget = InlineBudget::new();
        for id in &d.artifacts_in {
            text.push('\n');
            text.push_str(&artifact_line(engine.store(), id, &mut budget, None).await);
        }
    }
    if let Some(schema) = &d.expect {
        text.push_str(&format!(
            "\n\nAnswer with JSON only (no prose around it) that matches this JSON Schema:\n{schema}"
        ));
    }
    text
}

/// The answer as JSON matching `schema`, or every reason it does not.
pub(super) fn validate(schema: &Value, answer: &str) -> Result<Value, Vec<String>> {
    let json = strip_fence(answer.trim());
    if json.is_empty() {
        return Err(vec!["the answer was empty; JSON was expected".into()]);
    }
    let value: Value =
        serde_json::from_str(json).map_err(|err| vec![format!("the answer is not JSON: {err}")])?;
    let validator = jsonschema::validator_for(schema).map_err(|err| vec![err.to_string()])?;
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|err| {
            let at = err.instance_path().to_string();
            let at = if at.is_empty() { "/".into() } else { at };
            format!("at {at}: {err}")
        })
        .collect();
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

/// Models like to wrap JSON in a Markdown code fence; the JSON is what is inside.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map_or("", |(_, body)| body);
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

/// The second chance: what was wrong, and the same request.
pub(super) fn again(errors: &[String]) -> String {
    format!(
        "Message from baton: your answer did not match the JSON Schema you were given:\n- {}\n\
         Answer again with JSON only that matches it.",
        errors.join("\n- ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["vendors"],
            "properties": {"vendors": {"type": "array", "items": {"type": "string"}}}
        })
    }

    #[test]
    fn a_matching_answer_is_its_json_fenced_or_not() {
        let plain = validate(&schema(), r#"{"vendors": ["acme"]}"#).unwrap();
        assert_eq!(plain, json!({"vendors": ["acme"]}));
        let fenced = validate(&schema(), "```json\n{\"vendors\": []}\n```").unwrap();
        assert_eq!(fenced, json!({"vendors": []}));
    }

    #[test]
    fn each_mismatch_is_named_with_where() {
        let errors = validate(&schema(), r#"{"vendors": ["acme", 3]}"#).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("at /vendors/1:"), "{errors:?}");
        let missing = validate(&schema(), "{}").unwrap_err();
        assert!(missing[0].contains("vendors"), "{missing:?}");
        let prose = validate(&schema(), "Sure! Here it is.").unwrap_err();
        assert!(prose[0].contains("not JSON"), "{prose:?}");
        assert!(again(&prose).contains("not JSON"));
    }

    #[test]
    fn a_broken_schema_is_refused_with_what_to_give() {
        let err = check_schema(&json!({"type": 12})).unwrap_err().to_string();
        assert!(err.contains("JSON Schema"), "{err}");
        assert!(check_schema(&schema()).is_ok());
    }
}
