//! `stream = "native"` on Feishu/Lark: the reply is a streaming card (CardKit). A card entity
//! is created in streaming mode with one markdown element holding the text, posted as an
//! `interactive` message (the same reply, topic and `uuid` rules as a text post), and its
//! element's text is replaced in place as the reply grows (Feishu types out what it adds).
//! These updates are not message edits, so the 20-edit cap does not apply. At the end the
//! element gets the final text and the card leaves streaming mode.
//!
//! Every update of a card carries a `sequence` that must grow. It follows the clock (tenths of
//! a second since 2026), and past it by one per update: updates of one stream are paced at
//! least 100 ms apart, so a process that picks up a card another one streamed before a crash
//! (`POST /cardkit/v1/cards/id_convert` gives the card of its message) still numbers its
//! updates above the ones made before. An app that may not create cards (no CardKit
//! permission) posts text and is edited instead; that refusal is remembered for the process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use baton_contract::{OutboundMessage, SendError, StreamStart, StreamText};
use serde_json::json;

use crate::api::{Api, ApiError, Content};
use crate::outbound::{Posted, send, send_as, send_error, uuid_for};

/// The id of the card's one text element.
const ELEMENT: &str = "reply";

/// Where card sequences count from: 2026-01-01T00:00:00Z.
const SEQUENCE_EPOCH: Duration = Duration::from_secs(1_767_225_600);

/// The streaming cards this account is writing, by message id.
#[derive(Default)]
pub(crate) struct CardStreams {
    live: Mutex<HashMap<String, Card>>,
    refused: AtomicBool,
}

/// One card being streamed.
#[derive(Debug, Clone)]
struct Card {
    id: String,
    /// The last `sequence` used on it.
    sequence: u64,
}

impl CardStreams {
    /// Whether a card is worth trying (the app has not been refused one).
    pub(crate) fn available(&self) -> bool {
        !self.refused.load(Ordering::Relaxed)
    }

    /// Create a streaming card showing `message`'s text and post it; a text post where the
    /// app may not create cards.
    pub(crate) async fn start(
        &self,
        api: &Api,
        posted: &Posted,
        message: &OutboundMessage,
    ) -> Result<StreamStart, SendError> {
        if !self.available() {
            return send(api, posted, message).await.map(StreamStart::Posted);
        }
        let card = json!({
            "schema": "2.0",
            "config": { "streaming_mode": true, "update_multi": true },
            "body": { "elements": [
                { "tag": "markdown", "element_id": ELEMENT, "content": message.text }
            ] },
        });
        let card_id = match api.create_card(&card).await {
            Ok(id) => id,
            Err(ApiError::Feishu { code, msg }) => {
                tracing::info!(code, %msg, "Feishu refused a CardKit card; replies stream by editing their posts for this app");
                self.refused.store(true, Ordering::Relaxed);
                return send(api, posted, message).await.map(StreamStart::Posted);
            }
            Err(other) => return Err(send_error(other)),
        };
        let sent = send_as(api, posted, message, &Content::card(&card_id)).await?;
        self.live.lock().expect("card streams poisoned").insert(
            sent.message_id.to_string(),
            Card {
                id: card_id,
                sequence: 0,
            },
        );
        Ok(StreamStart::Live(sent))
    }

    /// Show `update.text` in its card.
    pub(crate) async fn update(&self, api: &Api, update: &StreamText) -> Result<(), SendError> {
        let (card, sequence) = self.next(api, update).await?;
        let uuid = uuid_for(&format!("{}#{sequence}", update.message_id));
        api.card_text(&card, ELEMENT, &update.text, sequence, &uuid)
            .await
            .map_err(send_error)
    }

    /// Show `end.text` in its card and end its streaming mode.
    pub(crate) async fn end(&self, api: &Api, end: &StreamText) -> Result<(), SendError> {
        if end.shown.as_deref() != Some(end.text.as_str()) {
            self.update(api, end).await?;
        }
        let (card, sequence) = self.next(api, end).await?;
        let uuid = uuid_for(&format!("{}#{sequence}", end.message_id));
        api.card_settings(&card, &json!({ "streaming_mode": false }), sequence, &uuid)
            .await
            .map_err(send_error)?;
        self.live
            .lock()
            .expect("card streams poisoned")
            .remove(end.message_id.as_str());
        Ok(())
    }

    /// The card of `stream`'s message and the next sequence number for it. A card this
    /// process did not start (an attempt cut off by a restart did) is looked up by its message.
    async fn next(&self, api: &Api, stream: &StreamText) -> Result<(String, u64), SendError> {
        let message = stream.message_id.as_str();
        let known = self
            .live
            .lock()
            .expect("card streams poisoned")
            .contains_key(message);
        if !known {
            let id = api.card_of_message(message).await.map_err(send_error)?;
            tracing::info!(message, card = %id, "a streaming card started before a restart is ended by this process");
            self.live
                .lock()
                .expect("card streams poisoned")
                .entry(message.to_owned())
                .or_insert(Card { id, sequence: 0 });
        }
        let mut live = self.live.lock().expect("card streams poisoned");
        let card = live.get_mut(message).ok_or_else(|| SendError::Rejected {
            code: "stream_unknown".into(),
            message: format!("the streaming card of message `{message}` was ended meanwhile"),
        })?;
        card.sequence = (card.sequence + 1).max(clock_sequence());
        Ok((card.id.clone(), card.sequence))
    }
}

/// The clock as a card sequence: tenths of a second since [`SEQUENCE_EPOCH`].
fn clock_sequence() -> u64 {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH + SEQUENCE_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis() / 100).unwrap_or(u64::MAX)
}
