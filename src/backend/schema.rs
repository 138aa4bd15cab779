//! The published shape of the turn an agent gets (`baton schema turn`), derived from the same
//! types that are serialized, so the schema cannot drift from what is sent.

use sha2::{Digest, Sha256};

use super::TurnRequest;

/// The version of the turn's shape, in its `version` field and the schema's `$id`.
pub const TURN_SCHEMA_VERSION: u32 = 1;

/// The JSON Schema (draft 2020-12) of the turn, as baton writes it: a field left out when
/// empty is optional.
pub fn turn_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<TurnRequest>()).unwrap_or_default()
}

/// The stable id of conversation `conversation` (its reset point, 0 before any reset) of the
/// session rendered as `session`, shaped as a UUID (version 8, the vendor-defined one): agents
/// that key their memory by UUID take it as it is. It is the same for every turn until an admin
/// resets the session (`/baton reset`), then a new one: a reset starts a new conversation.
pub fn session_id(session: &str, conversation: i64) -> String {
    let key = match conversation {
        0 => session.to_owned(),
        n => format!("{session}#{n}"),
    };
    let mut bytes: [u8; 16] = Sha256::digest(key.as_bytes())[..16]
        .try_into()
        .expect("a SHA-256 digest has 32 bytes");
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_a_stable_uuid() {
        let id = session_id("bot:snark:local:snark:c1", 0);
        assert_eq!(id, session_id("bot:snark:local:snark:c1", 0));
        assert_ne!(id, session_id("bot:snark:local:snark:c2", 0));
        assert_ne!(
            id,
            session_id("bot:snark:local:snark:c1", 7),
            "after a reset"
        );
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
        assert_eq!(&id[14..15], "8", "version 8");
    }

    #[test]
    fn the_schema_names_the_agent_facing_fields() {
        let schema = turn_schema();
        let properties = schema["properties"].as_object().unwrap();
        for field in [
            "version",
            "bot",
            "session_id",
            "messages",
            "trigger",
            "tools",
        ] {
            assert!(properties.contains_key(field), "{field}");
        }
        assert!(schema["$defs"]["AgentAccess"]["properties"]["token"].is_object());
    }
}
