//! Answering `/baton` privately, inside Discord's 3-second window.
//!
//! Discord drops an interaction that gets no response within 3 s ("The application did not
//! respond"). Admin commands usually answer in milliseconds, so the first chunk goes out as the
//! interaction's response itself (`CHANNEL_MESSAGE_WITH_SOURCE`, ephemeral). When the answer is
//! slow, a timer sends a deferral (`DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE`, ephemeral: the user
//! sees "baton is thinking…") after [`DEFER_AFTER`], and the answer then edits that message.
//! Later chunks are ephemeral follow-ups. Interactions that arrive over HTTP (`public_key` set)
//! are answered in the HTTP response itself: the endpoint waits up to [`DEFER_AFTER`] for the
//! first chunk and sends it as the response, or sends the deferral — never a REST call racing
//! the response Discord is still waiting for.
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
#[derive(Debug)]
pub enum Phase {
    /// Nothing sent yet: the first chunk is the interaction response (callback).
    Pending,
    /// An HTTP interaction whose request is still open: the first chunk goes to the endpoint,
    /// which sends it as the HTTP response.
    Http(tokio::sync::oneshot::Sender<String>),
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

    /// For the HTTP endpoint, once its wait is over: if the answer has not come, mark the
    /// interaction deferred (the endpoint then responds with the deferral) and return `None`;
    /// if it came, return it (the endpoint responds with it).
    pub async fn settle_http(
        &self,
        id: &str,
        answer: &mut tokio::sync::oneshot::Receiver<String>,
    ) -> Option<String> {
        let entry = self.entry(id);
        let mut phase = entry.phase.lock().await;
        if let Ok(text) = answer.try_recv() {
            return Some(text);
        }
        *phase = Phase::Deferred;
        None
    }

    /// Defer the interaction if nothing has answered it yet.
    pub async fn defer_if_pending(&self, rest: &Rest, handle: &str) {
        let Some((id, token)) = split_reply_token(handle) else {
            return;
        };
        let entry = self.entry(id);
        let mut phase = entry.phase.lock().await;
        if !matches!(*phase, Phase::Pending) {
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
        let previous = std::mem::replace(&mut *phase, Phase::Answered);
        // What the phase goes back to if this chunk fails (a 429 is retried with it).
        let restore = match &previous {
            Phase::Deferred => Phase::Deferred,
            Phase::Answered => Phase::Answered,
            Phase::Pending | Phase::Http(_) => Phase::Pending,
        };
        let result = match previous {
            Phase::Http(endpoint) => match endpoint.send(text.to_owned()) {
                Ok(()) => Ok(Value::Null),
                // The endpoint's request went away before it settled: nothing was sent.
                Err(_) => callback(rest, id, token, &json!({ "type": 4, "data": data }))
                    .await
                    .map(|()| Value::Null),
            },
            Phase::Pending => callback(rest, id, token, &json!({ "type": 4, "data": data }))
                .await
                .map(|()| Value::Null),
            Phase::Deferred => {
                let path = format!("{webhook}/messages/@original");
                rest.call(Method::PATCH, &path, Some(&data), Auth::Interaction, &route)
                    .await
            }
            Phase::Answered => {
                rest.call(
                    Method::POST,
                    &webhook,
                    Some(&data),
                    Auth::Interaction,
                    &route,
                )
                .await
            }
        };
        let posted = match result {
            Ok(posted) => posted,
            Err(err) => {
                *phase = restore;
                return Err(err);
            }
        };
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

#[cfg(test)]
mod tests {
    use baton_contract::Secret;

    use super::*;

    impl Interactions {
        async fn phase_name(&self, id: &str) -> &'static str {
            match *self.entry(id).phase.lock().await {
                Phase::Pending => "pending",
                Phase::Http(_) => "http",
                Phase::Deferred => "deferred",
                Phase::Answered => "answered",
            }
        }
    }

    /// A REST client whose every call fails to connect (nothing listens on port 9 here).
    fn unreachable() -> Rest {
        Rest::new("http://127.0.0.1:9", Secret::new("t"))
    }

    #[tokio::test]
    async fn an_http_interactions_first_chunk_goes_to_the_waiting_endpoint() {
        let i = Interactions::default();
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        i.register("1", Phase::Http(tx));
        i.answer(&unreachable(), "app", "1:tok", "hello")
            .await
            .unwrap();
        assert_eq!(rx.try_recv().unwrap(), "hello");
        assert_eq!(i.phase_name("1").await, "answered");
    }

    #[tokio::test]
    async fn a_slow_http_answer_is_deferred_and_a_failed_chunk_keeps_its_phase() {
        let i = Interactions::default();
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        i.register("1", Phase::Http(tx));
        assert_eq!(i.settle_http("1", &mut rx).await, None);
        assert_eq!(i.phase_name("1").await, "deferred");
        // The edit cannot reach Discord: the chunk fails and a retry will edit again.
        let err = i.answer(&unreachable(), "app", "1:tok", "late").await;
        assert!(matches!(err, Err(SendError::Transport(_))), "{err:?}");
        assert_eq!(i.phase_name("1").await, "deferred");
    }

    #[tokio::test]
    async fn a_failed_first_answer_over_the_gateway_stays_pending_for_the_deferral() {
        let i = Interactions::default();
        i.register("1", Phase::Pending);
        assert!(i.answer(&unreachable(), "app", "1:tok", "x").await.is_err());
        assert_eq!(i.phase_name("1").await, "pending");
        assert!(
            i.answer(&unreachable(), "app", "no-colon", "x")
                .await
                .is_err()
        );
    }
}
