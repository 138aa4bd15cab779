//! One post to a platform: where it goes ([`Target`]), why it did not get there
//! ([`DeliveryFailed`], [`Undelivered`]), and the one retry that is safe (`with_retry`: after a
//! 429, nothing was posted). Text (`send.rs`), files (`files.rs`) and streams (`stream.rs`) all
//! post through these.

use std::time::Duration;

use baton_contract::{ChatId, CommandReply, MessageId, SendError, ThreadId, UserId};

use crate::store::StoreError;

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
pub struct DeliveryFailed {
    /// Index of the post that failed (0-based): its text chunks, then its files.
    pub chunk: usize,
    /// How many posts the reply had.
    pub total: usize,
    /// The name of the attached file that failed, when it was a file.
    pub file: Option<String>,
    /// Why.
    pub cause: Undelivered,
}

impl std::fmt::Display for DeliveryFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, total, cause) = (self.chunk + 1, self.total, &self.cause);
        match &self.file {
            None => write!(f, "chunk {n} of {total} was not delivered: {cause}"),
            Some(name) => write!(
                f,
                "the attached file `{name}` (post {n} of {total}) was not delivered: {cause}"
            ),
        }
    }
}

/// Why a chunk was not posted.
#[derive(Debug, thiserror::Error)]
pub enum Undelivered {
    /// The platform refused it, or could not be reached.
    #[error(transparent)]
    Platform(#[from] SendError),
    /// An earlier attempt was cut off mid-post by a stop; it may have reached the chat.
    #[error(
        "an earlier attempt was cut off mid-post when the gateway stopped; it is not posted again, \
         so the chat never sees it twice"
    )]
    Interrupted,
    /// The store could not record the post, so it was not made (no answer without a record).
    #[error("not posted, because the store cannot record it: {0}")]
    Store(#[from] StoreError),
}

/// Run a platform call, and again after each 429's `Retry-After` (nothing was done, so it is
/// safe), up to [`RATE_LIMIT_RETRIES`] times.
pub(super) async fn with_retry<T, F, Fut>(call: F) -> Result<T, SendError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, SendError>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Err(SendError::RateLimited { retry_after })
                if attempt < RATE_LIMIT_RETRIES && retry_after <= MAX_RETRY_AFTER =>
            {
                attempt += 1;
                tracing::warn!(?retry_after, attempt, "platform rate limit; retrying");
                tokio::time::sleep(retry_after).await;
            }
            other => return other,
        }
    }
}
