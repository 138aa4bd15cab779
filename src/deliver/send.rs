//! Pipeline step 12, posting: chunk a reply, send each chunk once, retry only when safe.
//!
//! Each chunk carries an idempotency key `<run id>#<n>`. Before posting, the transcript is asked
//! whether that key was already delivered (a replay after a restart must not post twice), and
//! the adapter passes the key to platforms that honour one. A 429 is retried after its
//! `Retry-After`, because nothing was posted. A transport failure is *not* retried — its fate is
//! unknown and a blind retry is how double posts happen — it is recorded as a failure instead.

use std::time::Duration;

use baton_contract::{
    Adapter, ChatId, CommandReply, MessageId, OutboundMessage, SendError, SentMessage, ThreadId,
    UserId,
};

use super::split;
use crate::mirror::Journal;

/// How many times one chunk is retried after a 429.
const RATE_LIMIT_RETRIES: u32 = 5;
/// The longest wait a platform's `Retry-After` is honoured for before giving up.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Where a reply goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The chat.
    pub chat: ChatId,
    /// The thread the message came from, if any: the reply goes there, never also to the channel.
    pub thread: Option<ThreadId>,
    /// The message being answered (platforms with native replies).
    pub reply_to: Option<MessageId>,
    /// Answer privately (native commands).
    pub ephemeral: Option<(UserId, CommandReply)>,
}

/// A reply that did not fully reach the platform.
#[derive(Debug, thiserror::Error)]
#[error("chunk {} of {total} was not delivered: {error}", .chunk + 1)]
pub struct DeliveryFailed {
    /// Index of the chunk that failed (0-based).
    pub chunk: usize,
    /// How many chunks the reply had.
    pub total: usize,
    /// Why.
    pub error: SendError,
}

/// Split `text` to the adapter's limit and post every chunk to `target`, recording each in
/// `journal`. Returns the platform message ids.
pub async fn deliver(
    adapter: &dyn Adapter,
    target: &Target,
    text: &str,
    journal: &Journal,
) -> Result<Vec<MessageId>, DeliveryFailed> {
    let chunks = split(text, adapter.capabilities().max_message_chars);
    let total = chunks.len();
    let mut ids = Vec::with_capacity(total);
    for (n, chunk) in chunks.into_iter().enumerate() {
        let key = format!("{}#{n}", journal.run_id());
        if let Ok(Some(id)) = journal.store().delivered(&key).await {
            ids.push(MessageId(id));
            continue;
        }
        let message = OutboundMessage {
            chat: target.chat.clone(),
            thread: target.thread.clone(),
            reply_to: target.reply_to.clone(),
            text: chunk,
            idempotency_key: key,
            ephemeral: target.ephemeral.clone(),
        };
        let sent = send_with_retry(adapter, &message)
            .await
            .map_err(|error| DeliveryFailed {
                chunk: n,
                total,
                error,
            })?;
        journal
            .delivered(
                &message.text,
                sent.message_id.as_str(),
                &message.idempotency_key,
            )
            .await;
        ids.push(sent.message_id);
    }
    Ok(ids)
}

async fn send_with_retry(
    adapter: &dyn Adapter,
    message: &OutboundMessage,
) -> Result<SentMessage, SendError> {
    let mut attempt = 0;
    loop {
        match adapter.send(message).await {
            Err(SendError::RateLimited { retry_after })
                if attempt < RATE_LIMIT_RETRIES && retry_after <= MAX_RETRY_AFTER =>
            {
                attempt += 1;
                tracing::warn!(
                    ?retry_after,
                    attempt,
                    "platform rate limit; retrying the chunk"
                );
                tokio::time::sleep(retry_after).await;
            }
            other => return other,
        }
    }
}
