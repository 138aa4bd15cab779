//! Pipeline step 13: mirror everything to the session transcript, in the order it happened.
//!
//! A [`Journal`] is one turn's pen: the inbound message, every tool call and result, the outcome
//! (`Silent` included) and each delivered chunk with its platform message id all go through it,
//! attributed to their speaker. A failed transcript write is logged, not raised. A store that
//! cannot write still answers nothing: the event is refused at intake (`src/dispatcher/inbox.rs`)
//! and a post whose start cannot be recorded is not made (`src/deliver/send.rs`).

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::store::{EntryKind, NewEntry, Origin, Store};
use crate::turn::{ToolCall, ToolExecutor};

/// Writes one turn's entries to one session.
#[derive(Clone)]
pub struct Journal {
    store: Store,
    session: String,
    bot: String,
    run_id: String,
}

impl Journal {
    /// A journal for `run_id` of `bot` in `session`.
    pub fn new(store: Store, session: String, bot: String, run_id: String) -> Self {
        Self {
            store,
            session,
            bot,
            run_id,
        }
    }

    /// The session key.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The run id every entry of this turn carries.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The store behind it.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Record a line someone else said to the bot.
    pub async fn heard(
        &self,
        speaker: &str,
        origin: Origin,
        text: &str,
        message_id: Option<&str>,
        meta: Value,
    ) {
        self.write(
            EntryKind::Inbound,
            speaker,
            origin,
            text,
            message_id,
            None,
            meta,
        )
        .await;
    }

    /// Record what the bot itself did (`Silent`, `Failure`, `Notice`, `Admin`).
    pub async fn bot_did(&self, kind: EntryKind, text: &str, meta: Value) {
        let bot = self.bot.clone();
        self.write(kind, &bot, Origin::Bot, text, None, None, meta)
            .await;
    }

    /// Record one delivered chunk.
    pub async fn delivered(&self, text: &str, message_id: &str, idempotency_key: &str) {
        let bot = self.bot.clone();
        self.write(
            EntryKind::Reply,
            &bot,
            Origin::Bot,
            text,
            Some(message_id),
            Some(idempotency_key),
            Value::Null,
        )
        .await;
    }

    #[allow(clippy::too_many_arguments)]
    async fn write(
        &self,
        kind: EntryKind,
        speaker: &str,
        origin: Origin,
        text: &str,
        message_id: Option<&str>,
        idempotency_key: Option<&str>,
        meta: Value,
    ) {
        let entry = NewEntry {
            session: self.session.clone(),
            ts_ms: now_ms(),
            kind,
            speaker: speaker.to_owned(),
            origin,
            text: text.to_owned(),
            platform_message_id: message_id.map(str::to_owned),
            run_id: Some(self.run_id.clone()),
            idempotency_key: idempotency_key.map(str::to_owned),
            meta,
        };
        if let Err(err) = self.store.append(entry).await {
            tracing::error!(session = %self.session, %err, "could not write the transcript");
        }
    }
}

/// Wraps a turn's tool executor so every call and result lands in the transcript.
pub struct RecordingTools<'a> {
    inner: &'a dyn ToolExecutor,
    journal: &'a Journal,
}

impl<'a> RecordingTools<'a> {
    /// Record the calls made through `inner` in `journal`.
    pub fn new(inner: &'a dyn ToolExecutor, journal: &'a Journal) -> Self {
        Self { inner, journal }
    }
}

#[async_trait]
impl ToolExecutor for RecordingTools<'_> {
    async fn call(&self, call: &ToolCall) -> Value {
        let args = json!({"tool": call.name, "call_id": call.id, "arguments": call.arguments});
        let text = format!("{} {}", call.name, call.arguments);
        self.journal.bot_did(EntryKind::ToolCall, &text, args).await;
        let result = self.inner.call(call).await;
        self.journal
            .bot_did(
                EntryKind::ToolResult,
                &result.to_string(),
                json!({"tool": call.name, "call_id": call.id}),
            )
            .await;
        result
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
