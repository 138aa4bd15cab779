//! `stream = "native"` on Slack: a reply streamed with `chat.startStream`, grown with
//! `chat.appendStream` and ended with `chat.stopStream`, in the thread of the message answered
//! and shown to the person who asked (`recipient_user_id`, `recipient_team_id`).
//!
//! A workspace or app that refuses the methods (an unknown method, a token type or plan that
//! may not stream) gets the reply as an ordinary post, which the gateway then edits in place;
//! the refusal is remembered, so it costs one request per process, not one per reply.

use std::sync::atomic::{AtomicBool, Ordering};

use baton_contract::{OutboundMessage, SendError, StreamFor, StreamStart, StreamText};

use crate::api::Api;
use crate::normalize::{message_id, ts_of};
use crate::outbound;

/// The `ok:false` codes that say this app or workspace cannot stream at all.
const REFUSED: [&str; 6] = [
    "unknown_method",
    "not_allowed_token_type",
    "missing_scope",
    "not_allowed",
    "feature_not_enabled",
    "team_not_allowed",
];

/// Whether this app may stream (unknown until the first start).
#[derive(Default)]
pub(crate) struct Streams {
    refused: AtomicBool,
}

impl Streams {
    /// Whether a stream is worth trying (the workspace has not refused one).
    pub(crate) fn available(&self) -> bool {
        !self.refused.load(Ordering::Relaxed)
    }

    /// Start `message` as a stream for `to` in its thread, or post it where Slack will not
    /// stream it (a private answer, no thread to stream into, a refusal).
    pub(crate) async fn start(
        &self,
        api: &Api,
        team: Option<&str>,
        message: &OutboundMessage,
        to: &StreamFor,
    ) -> Result<StreamStart, SendError> {
        let channel = message.chat.as_str();
        let thread_ts = message
            .thread
            .as_ref()
            .map(|t| t.as_str())
            .or_else(|| message.reply_to.as_ref().and_then(ts_of));
        let (Some(thread_ts), true, None) =
            (thread_ts, self.available(), message.ephemeral.as_ref())
        else {
            return outbound::send(api, message).await.map(StreamStart::Posted);
        };
        let recipient = to.user.as_ref().zip(team).map(|(u, t)| (u.as_str(), t));
        match api
            .start_stream(channel, thread_ts, recipient, &message.text)
            .await
        {
            Ok(ts) => Ok(StreamStart::Live(baton_contract::SentMessage {
                message_id: message_id(channel, &ts),
            })),
            Err(SendError::Rejected { code, .. }) => {
                if REFUSED.contains(&code.as_str()) {
                    tracing::info!(
                        %code,
                        "Slack refused chat.startStream; replies stream by editing their posts \
                         for this app"
                    );
                    self.refused.store(true, Ordering::Relaxed);
                } else {
                    tracing::warn!(%code, "Slack refused a stream; the reply is posted and edited");
                }
                outbound::send(api, message).await.map(StreamStart::Posted)
            }
            Err(other) => Err(other),
        }
    }

    /// Add what `update` adds to its stream.
    pub(crate) async fn update(&self, api: &Api, update: &StreamText) -> Result<(), SendError> {
        let ts = outbound::message_ts(&update.message_id)?;
        match update.added() {
            Some(added) if !added.is_empty() => {
                api.append_stream(update.chat.as_str(), ts, added).await
            }
            _ => Ok(()),
        }
    }

    /// End the stream showing exactly `end.text`: what it adds goes with `chat.stopStream`;
    /// text that does not only add (or a stream that ended already) is put with `chat.update`.
    pub(crate) async fn end(&self, api: &Api, end: &StreamText) -> Result<(), SendError> {
        let channel = end.chat.as_str();
        let ts = outbound::message_ts(&end.message_id)?;
        let added = end.added();
        match api.stop_stream(channel, ts, added.unwrap_or("")).await {
            Ok(()) if added.is_some() => Ok(()),
            Ok(()) | Err(SendError::Rejected { .. }) => {
                api.update_message(channel, ts, &end.text).await
            }
            Err(other) => Err(other),
        }
    }
}
