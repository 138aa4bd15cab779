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
    // Hashed and written without a string per byte: every turn's request carries it.
    let mut key = Sha256::new().chain_update(session);
    if conversation != 0 {
        key.update(format!("#{conversation}"));
    }
    let digest = key.finalize();
    let bytes: [u8; 16] = digest[..16]
        .try_into()
        .expect("a SHA-256 digest has 32 bytes");
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
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
        // The ids agents were given before keep being given: the first 16 bytes of the
        // key's SHA-256, version 8, RFC 4122 variant, lowercase.
        assert_eq!(id, "297d41c5-ceec-85b9-b5e1-0b8270e5186e");
        assert_eq!(
            session_id("bot:snark:local:snark:c1", 7),
            "f6dbb24f-d682-8e92-8187-5cd455864737"
        );
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
