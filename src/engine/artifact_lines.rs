//! Artifacts as a turn reads them in its message: a text artifact inline when it is small (a
//! model should not have to call a tool to read a 2 kB table), anything else by reference (id,
//! name, media type, size, who made it) to be read with `artifact_get`. One message's inlined
//! text is bounded, so it cannot flood the context. Both the inputs of a `sessions_send` and the
//! files posted in a chat are given this way.

use crate::media_type;
use crate::store::{Artifact, Store};

/// The largest artifact put in a message as text.
pub(crate) const INLINE_BYTES: u64 = 16 * 1024;

/// The most text all of a message's inlined artifacts may add up to; the rest go by reference.
pub(crate) const INLINE_TOTAL_BYTES: u64 = 64 * 1024;

/// What is left of one message's [`INLINE_TOTAL_BYTES`].
pub(crate) struct InlineBudget(u64);

impl InlineBudget {
    /// A whole budget, for one message.
    pub(crate) fn new() -> Self {
        InlineBudget(INLINE_TOTAL_BYTES)
    }
}

/// The artifact `id` as a line of the message: inline while it is text and within the budgets.
/// `posted_by` names the person (or outside bot) who posted it in a chat, for a file the bot
/// did not get from another bot.
pub(crate) async fn artifact_line(
    store: &Store,
    id: &str,
    budget: &mut InlineBudget,
    posted_by: Option<&str>,
) -> String {
    let artifact = match store.artifact(id).await {
        Ok(Some(artifact)) => artifact,
        Ok(None) => return format!("- {id}: no longer kept (retention removed it)"),
        Err(err) => return format!("- {id}: could not be read ({err}); try artifact_get"),
    };
    let head = reference(&artifact, posted_by);
    let fits = artifact.bytes <= INLINE_BYTES && artifact.bytes <= budget.0;
    if !(fits && media_type::is_text(&artifact.media_type)) {
        return format!("{head}; read it with artifact_get");
    }
    match store.artifact_content(id).await {
        Ok(Some((_, content))) => match String::from_utf8(content) {
            Ok(content) => {
                budget.0 -= artifact.bytes;
                format!("{head}:\n{content}\n(end of {})", artifact.id)
            }
            Err(_) => format!("{head}; read it with artifact_get"),
        },
        _ => format!("{head}; read it with artifact_get"),
    }
}

/// The line naming an artifact: `- <id> `<name>` (<type>, <n> bytes, made by <bot>)`, or
/// `posted by <sender>` for a file posted in a chat.
pub(crate) fn reference(a: &Artifact, posted_by: Option<&str>) -> String {
    let by = match posted_by {
        Some(sender) => format!("posted by {sender}"),
        None => format!("made by {}", a.bot),
    };
    format!(
        "- {} `{}` ({}, {} bytes, {by})",
        a.id, a.name, a.media_type, a.bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::TestDb;
    use crate::store::{NewArtifact, Put};

    async fn put(store: &Store, name: &str, media_type: &str, content: Vec<u8>) -> String {
        let new = NewArtifact {
            name: name.into(),
            media_type: media_type.into(),
            content,
            bot: "scout".parse().unwrap(),
            session: "bot:scout:local:local-scout:dm:x".parse().unwrap(),
            run_id: Some("r1".into()),
            inputs: Vec::new(),
            created_ms: 1,
        };
        match store.artifact_put(new).await.unwrap() {
            Put::Stored(a) => a.id,
            Put::UnknownInputs(u) => panic!("unknown inputs {u:?}"),
        }
    }

    #[tokio::test]
    async fn small_text_is_inlined_and_spends_the_message_budget() {
        let db = TestDb::sqlite();
        let store = db.open().await;
        let id = put(&store, "t.csv", "text/csv", b"a,b\n1,2".to_vec()).await;
        let mut budget = InlineBudget::new();
        let line = artifact_line(&store, &id, &mut budget, None).await;
        assert!(line.contains("a,b\n1,2"), "{line}");
        assert!(line.contains("made by scout"), "{line}");
        assert!(line.ends_with(&format!("(end of {id})")), "{line}");
        assert_eq!(budget.0, INLINE_TOTAL_BYTES - 7);
    }

    #[tokio::test]
    async fn binary_large_or_over_budget_artifacts_go_by_reference() {
        let db = TestDb::sqlite();
        let store = db.open().await;
        let binary = put(&store, "p.png", "image/png", vec![0x89, b'P']).await;
        let large = put(&store, "big.txt", "text/plain", vec![b'x'; 16 * 1024 + 1]).await;
        let small = put(&store, "s.txt", "text/plain", b"hello".to_vec()).await;
        for (id, mut budget) in [
            (&binary, InlineBudget::new()),
            (&large, InlineBudget::new()),
            (&small, InlineBudget(4)),
        ] {
            let left = budget.0;
            let line = artifact_line(&store, id, &mut budget, Some("alice")).await;
            assert!(line.ends_with("; read it with artifact_get"), "{line}");
            assert!(line.contains("posted by alice"), "{line}");
            assert_eq!(budget.0, left, "a reference spends no budget");
        }
    }

    #[tokio::test]
    async fn an_artifact_no_longer_kept_is_said_so() {
        let db = TestDb::sqlite();
        let store = db.open().await;
        let line = artifact_line(&store, "art_gone", &mut InlineBudget::new(), None).await;
        assert_eq!(line, "- art_gone: no longer kept (retention removed it)");
    }
}
