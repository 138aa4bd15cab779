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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Answers every call with `answer`, counting the calls.
    async fn calls(answer: impl Fn() -> SendError) -> (u32, SendError) {
        let made = AtomicU32::new(0);
        let result: Result<(), SendError> = with_retry(|| {
            made.fetch_add(1, Ordering::Relaxed);
            let err = answer();
            async move { Err(err) }
        })
        .await;
        (made.load(Ordering::Relaxed), result.unwrap_err())
    }

    /// A 429 is tried again after its `Retry-After`, five times at most; then its error is
    /// the caller's.
    #[tokio::test]
    async fn a_429_is_retried_five_times_then_given_up() {
        let limited = || SendError::RateLimited {
            retry_after: Duration::from_millis(1),
        };
        let (made, err) = calls(limited).await;
        assert_eq!(made, 1 + RATE_LIMIT_RETRIES);
        assert!(matches!(err, SendError::RateLimited { .. }), "{err}");
    }

    /// A `Retry-After` past a minute is not waited for, and no failure but a 429 is tried
    /// again: its fate is unknown, and a blind retry is how double posts happen.
    #[tokio::test]
    async fn only_a_429_within_a_minute_is_retried() {
        let far = || SendError::RateLimited {
            retry_after: MAX_RETRY_AFTER + Duration::from_secs(1),
        };
        assert_eq!(calls(far).await.0, 1);
        let reset = || SendError::Transport("connection reset".into());
        assert_eq!(calls(reset).await.0, 1);
    }

    /// A failure names the post that failed, counted from 1, and the file when it was one.
    #[test]
    fn a_failure_names_the_post_and_the_file() {
        let failed = |file: Option<&str>| DeliveryFailed {
            chunk: 2,
            total: 4,
            file: file.map(str::to_owned),
            cause: Undelivered::Interrupted,
        };
        let text = failed(None).to_string();
        assert!(
            text.starts_with("chunk 3 of 4 was not delivered: "),
            "{text}"
        );
        let file = failed(Some("plan.pdf")).to_string();
        assert!(
            file.starts_with("the attached file `plan.pdf` (post 3 of 4) was not delivered"),
            "{file}"
        );
    }
}
