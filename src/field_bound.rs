//! The size of every field an API takes, checked in one place: a request is bounded as a
//! whole (the body limit), but a field kept or carried further (an id in a store row, a name
//! in every event, a list walked per call) must be bounded on its own, or a few big ones pass
//! a body limit and cost the gateway far more than they weigh (issue 45).
//!
//! Each accepting route names its fields and their [`Cap`]s and calls [`check`]; the refusal
//! names the field, its size and the cap, so a client knows what to send instead.

use serde_json::Value;

/// The most bytes an id-like field may have: a room, a message id, a thread, a chain or run
/// id, an artifact id or name, a bot, a session key, an idempotency key, a model name.
pub const MAX_ID_BYTES: usize = 256;

/// The most bytes a text field may have: a message, a prompt, a summary, a note. The same as
/// a chat message's cap, as such a text ends up in a chat or a model's context.
pub const MAX_TEXT_BYTES: usize = 100 * 1024;

/// The most items a list field may have (participants, artifact ids, inputs).
pub const MAX_ITEMS: usize = 64;

/// The most bytes a free-form JSON field may have, serialized (`sessions_send`'s `expect`).
pub const MAX_JSON_BYTES: usize = 16 * 1024;

/// What a field may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// A string of at most [`MAX_ID_BYTES`].
    Id,
    /// A string of at most [`MAX_TEXT_BYTES`].
    Text,
    /// A string of at most this many bytes.
    Bytes(usize),
    /// A list of at most [`MAX_ITEMS`] items, each capped as given.
    List(&'static Cap),
    /// Any JSON, at most [`MAX_JSON_BYTES`] serialized.
    Json,
    /// Bounded elsewhere, by a configured cap checked where it is used (an artifact's content
    /// by `[artifacts] max_bytes`).
    Elsewhere,
}

impl Cap {
    /// The cap on the field's size, and its unit.
    fn max(self) -> (usize, &'static str) {
        match self {
            Cap::Id => (MAX_ID_BYTES, "bytes"),
            Cap::Text => (MAX_TEXT_BYTES, "bytes"),
            Cap::Bytes(max) => (max, "bytes"),
            Cap::List(_) => (MAX_ITEMS, "items"),
            Cap::Json => (MAX_JSON_BYTES, "bytes of JSON"),
            Cap::Elsewhere => (usize::MAX, "bytes"),
        }
    }
}

/// A field over its cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` is {len} {unit}, over the {max} it may have; send a shorter one")]
pub struct FieldTooLong {
    /// The field (`messages[].content`, `participants[]`).
    pub field: String,
    /// Its size.
    pub len: usize,
    /// Its cap.
    pub max: usize,
    /// What the size counts.
    pub unit: &'static str,
}

/// Whether `value`, the field `field`, is within `cap`. A value of another type than the cap
/// expects passes: the field's own parsing refuses it with a better reason.
pub fn check(field: &str, value: &Value, cap: Cap) -> Result<(), FieldTooLong> {
    let len = match (cap, value) {
        (Cap::Elsewhere, _) => return Ok(()),
        (Cap::Json, value) => serde_json::to_string(value).map_or(0, |s| s.len()),
        (Cap::List(item), Value::Array(items)) => {
            for one in items {
                check(&format!("{field}[]"), one, *item)?;
            }
            items.len()
        }
        (Cap::List(_), _) => return Ok(()),
        (_, Value::String(text)) => text.len(),
        _ => return Ok(()),
    };
    within(field, len, cap)
}

/// [`check`] for a string field, when there is one.
pub fn check_str(field: &str, value: Option<&str>, cap: Cap) -> Result<(), FieldTooLong> {
    value.map_or(Ok(()), |text| within(field, text.len(), cap))
}

fn within(field: &str, len: usize, cap: Cap) -> Result<(), FieldTooLong> {
    let (max, unit) = cap.max();
    if len > max {
        return Err(FieldTooLong {
            field: field.to_owned(),
            len,
            max,
            unit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_cap_names_the_field_and_its_limit() {
        assert!(check("id", &json!("a".repeat(MAX_ID_BYTES)), Cap::Id).is_ok());
        let err = check("id", &json!("a".repeat(MAX_ID_BYTES + 1)), Cap::Id).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`id` is 257 bytes, over the 256 it may have; send a shorter one"
        );
        let many = json!(vec!["x"; MAX_ITEMS + 1]);
        assert_eq!(
            check("ids", &many, Cap::List(&Cap::Id)).unwrap_err().unit,
            "items"
        );
        let long_item = json!(["ok", "b".repeat(MAX_ID_BYTES + 1)]);
        let err = check("ids", &long_item, Cap::List(&Cap::Id)).unwrap_err();
        assert_eq!(err.field, "ids[]");
        let big = json!({"k": "v".repeat(MAX_JSON_BYTES)});
        assert_eq!(
            check("expect", &big, Cap::Json).unwrap_err().field,
            "expect"
        );
        assert!(check("n", &json!(12), Cap::Id).is_ok());
        assert!(check("t", &json!("x".repeat(1 << 20)), Cap::Elsewhere).is_ok());
        assert!(check_str("user", None, Cap::Id).is_ok());
    }
}
