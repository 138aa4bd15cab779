//! Answering `/baton` privately, inside Discord's 3-second window.
//!
//! Discord drops an interaction that gets no response within 3 s ("The application did not
//! respond"). Admin commands usually answer in milliseconds, so the first chunk goes out as the
//! interaction's response itself (`CHANNEL_MESSAGE_WITH_SOURCE`, ephemeral). When the answer is
//! slow, a timer sends a deferral (`DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE`, ephemeral: the user
//! sees "baton is thinking…") after [`DEFER_AFTER`], and the answer then edits that message.
//! Later chunks are ephemeral follow-ups. Interactions that arrive over HTTP (`public_key` set)
//! are deferred in the HTTP response, so they start in the deferred phase.
//!
//! Each interaction's phase sits behind its own async lock, held across the HTTP call, so the
//! deferral and the answer can never both claim the initial response.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_contract::{MessageId, SendError, SentMessage};
use reqwest::Method;
use serde_json::{Value, json};

use crate::normalize::split_reply_token;
use crate::rest::{Auth, Rest};

/// When a still-unanswered interaction is deferred: well inside Discord's 3 s, with room for
/// the deferral's own round trip.
pub const DEFER_AFTER: Duration = Duration::from_millis(1500);
/// Interaction tokens are valid for 15 minutes; state is kept that long.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// `flags` for an ephemeral message.
const EPHEMERAL: u64 = 1 << 6;

/// Where an interaction's response stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing sent yet: the first chunk is the interaction response.
    Pending,
    /// A deferral was sent: the first chunk edits the original response.
    Deferred,
    /// The response has content: more chunks are follow-ups.
    Answered,
}

struct Entry {
    phase: tokio::sync::Mutex<Phase>,
    created: Instant,
}

/// The interactions this account has received and not yet forgotten.
#[derive(Default)]
pub struct Interactions {
    entries: Mutex<HashMap<String, Arc<Entry>>>,
}

impl Interactions {
    /// Start tracking an interaction (by id) in `phase`; forgets expired ones.
    pub fn register(&self, id: &str, phase: Phase) {
        let mut entries = self.entries.lock().expect("interactions lock poisoned");
        entries.retain(|_, e| e.created.elapsed() < TOKEN_LIFETIME);
        entries.insert(
            id.to_owned(),
            Arc::new(Entry {
                phase: tokio::sync::Mutex::new(phase),
                created: Instant::now(),
            }),
        );
    }

    fn entry(&self, id: &str) -> Arc<Entry> {
        let mut entries = self.entries.lock().expect("interactions lock poisoned");
        // Unknown (another process received it, or it expired): try the initial response; if it
        // was already made Discord refuses, and that refusal is reported.
        Arc::clone(entries.entry(id.to_owned()).or_insert_with(|| {
            Arc::new(Entry {
                phase: tokio::sync::Mutex::new(Phase::Pending),
                created: Instant::now(),
            })
        }))
    }

    /// The phase of an interaction, for tests and logs.
    pub async fn phase(&self, id: &str) -> Option<Phase> {
        let entry = {
            let entries = self.entries.lock().expect("interactions lock poisoned");
            entries.get(id).cloned()
        }?;
        let phase = *entry.phase.lock().await;
        Some(phase)
    }

    /// Defer the interaction if nothing has answered it yet.
    pub async fn defer_if_pending(&self, rest: &Rest, handle: &str) {
        let Some((id, token)) = split_reply_token(handle) else {
            return;
        };
        let entry = self.entry(id);
        let mut phase = entry.phase.lock().await;
        if *phase != Phase::Pending {
            return;
        }
        let body = json!({ "type": 5, "data": { "flags": EPHEMERAL } });
        match callback(rest, id, token, &body).await {
            Ok(()) => *phase = Phase::Deferred,
            Err(err) => tracing::warn!(%err, "could not defer a /baton interaction"),
        }
    }

    /// Send one chunk of the answer privately to the user who ran the command.
    pub async fn answer(
        &self,
        rest: &Rest,
        application_id: &str,
        handle: &str,
        text: &str,
    ) -> Result<SentMessage, SendError> {
        let Some((id, token)) = split_reply_token(handle) else {
            return Err(SendError::Rejected {
                code: "bad_interaction".into(),
                message: "the command's reply handle is not a Discord interaction".into(),
            });
        };
        let entry = self.entry(id);
        let mut phase = entry.phase.lock().await;
        let data = json!({
            "content": text,
            "flags": EPHEMERAL,
            "allowed_mentions": { "parse": [] },
        });
        let webhook = format!("/webhooks/{application_id}/{token}");
        let route = format!("webhook:{id}");
        let posted = match *phase {
            Phase::Pending => {
                callback(rest, id, token, &json!({ "type": 4, "data": data })).await?;
                Value::Null
            }
            Phase::Deferred => {
                let path = format!("{webhook}/messages/@original");
                rest.call(Method::PATCH, &path, Some(&data), Auth::Interaction, &route)
                    .await?
            }
            Phase::Answered => {
                rest.call(
                    Method::POST,
                    &webhook,
                    Some(&data),
                    Auth::Interaction,
                    &route,
                )
                .await?
            }
        };
        *phase = Phase::Answered;
        let id = posted.get("id").and_then(Value::as_str).unwrap_or_default();
        Ok(SentMessage {
            message_id: MessageId(id.to_owned()),
        })
    }
}

/// `POST /interactions/<id>/<token>/callback`.
async fn callback(rest: &Rest, id: &str, token: &str, body: &Value) -> Result<(), SendError> {
    let path = format!("/interactions/{id}/{token}/callback");
    let route = format!("interaction:{id}");
    rest.call(Method::POST, &path, Some(body), Auth::Interaction, &route)
        .await
        .map(drop)
}
