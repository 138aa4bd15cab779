//! Pipeline step 12, posting: chunk a reply, send each chunk once, retry only when safe.
//!
//! Each chunk carries an idempotency key `<run id>#<n>`. Before posting, the store records the
//! post as begun and says whether that key was already delivered or begun before (a replay after
//! a restart must not post twice: a begun post with no delivery was cut off mid-flight, and is
//! recorded as a failure rather than risked a second time). The adapter passes the key to
//! platforms that honour one. A 429 is retried after its
//! `Retry-After`, because nothing was posted. A transport failure is *not* retried — its fate is
//! unknown and a blind retry is how double posts happen — it is recorded as a failure instead.

use baton_contract::{Adapter, MessageId, OutboundMessage, StreamFor, StreamStart};

use super::attempt::with_retry;
use super::files::post_files;
use super::{DeliveryFailed, Handover, Target, Undelivered, split};
use crate::pen::Pen;
use crate::store::SendStart;
use crate::timing::now_ms;
use crate::trace::{Span, SpanKind, attr, in_span};

/// Split `text` to the adapter's limit and post every chunk to `target`, recording each in
/// `pen` together with its hand-over to the bots that must see it (`handover`), then the
/// files the run attached (`files.rs`; an empty `text` posts only those). Returns the platform
/// message ids.
pub async fn deliver(
    adapter: &dyn Adapter,
    handover: &Handover,
    target: &Target,
    text: &str,
    pen: &Pen,
) -> Result<Vec<MessageId>, DeliveryFailed> {
    let chunks = chunks(text, adapter.capabilities().max_message_chars).await;
    let total = chunks.len();
    let mut ids = Vec::with_capacity(total);
    for (n, chunk) in chunks.into_iter().enumerate() {
        let posted = post_chunk(adapter, handover, target, pen, n, chunk, Via::Post)
            .await
            .map_err(|cause| DeliveryFailed {
                chunk: n,
                total,
                file: None,
                cause,
            })?;
        ids.push(posted.id());
    }
    ids.extend(post_files(adapter, target, pen, total).await?);
    Ok(ids)
}

/// `text` split to `limit` chars, on a blocking thread when it is long enough for the work to
/// matter: chunking never holds up the reactor, so no reply delays another request.
async fn chunks(text: &str, limit: usize) -> Vec<String> {
    /// Below this, splitting takes microseconds: not worth a thread hop.
    const INLINE: usize = 64 * 1024;
    if text.is_empty() {
        return Vec::new();
    }
    if text.len() <= INLINE {
        return split(text, limit);
    }
    let text = text.to_owned();
    match tokio::task::spawn_blocking(move || split(&text, limit)).await {
        Ok(chunks) => chunks,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// How chunk `n` of a run came to be in the chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Posted {
    /// Posted now, with this text.
    Now(MessageId),
    /// Posted now as a live stream ([`Via::Stream`]), showing this text.
    Live(MessageId),
    /// Posted by an earlier attempt of the same run (a replay); its text is not known here.
    Before(MessageId),
}

impl Posted {
    pub(super) fn id(self) -> MessageId {
        match self {
            Posted::Now(id) | Posted::Live(id) | Posted::Before(id) => id,
        }
    }
}

/// How a chunk's post is made.
#[derive(Debug, Clone, Copy)]
pub(super) enum Via<'a> {
    /// An ordinary post.
    Post,
    /// The start of a live stream for this person (`stream = "native"`), where the platform
    /// takes one.
    Stream(&'a StreamFor),
}

/// Post chunk `n` of the run once: its idempotency key `<run id>#<n>` is recorded as
/// begun before the platform is called and as delivered (a transcript entry with the platform
/// id) after, so a replay finds it and never posts it twice.
pub(super) async fn post_chunk(
    adapter: &dyn Adapter,
    handover: &Handover,
    target: &Target,
    pen: &Pen,
    n: usize,
    text: String,
    via: Via<'_>,
) -> Result<Posted, Undelivered> {
    let key = format!("{}#{n}", pen.run_id());
    match pen.send_begin(&key, now_ms()).await? {
        SendStart::Go => {}
        SendStart::Delivered(id) => return Ok(Posted::Before(MessageId(id))),
        SendStart::Interrupted => return Err(Undelivered::Interrupted),
    }
    let message = OutboundMessage {
        chat: target.chat.clone(),
        thread: target.thread.clone(),
        reply_to: target.reply_to.clone(),
        text,
        idempotency_key: key,
        ephemeral: target.ephemeral.clone(),
    };
    let span = Span::start("post", SpanKind::Producer, || {
        vec![
            attr("baton.platform", adapter.platform().as_str()),
            attr("baton.chat", message.chat.as_str().to_owned()),
            attr("baton.idempotency_key", message.idempotency_key.clone()),
        ]
    });
    let sending = async {
        Ok::<_, Undelivered>(match via {
            Via::Post => (with_retry(|| adapter.send(&message)).await?, false),
            Via::Stream(to) => match with_retry(|| adapter.stream_start(&message, to)).await? {
                StreamStart::Live(sent) => (sent, true),
                StreamStart::Posted(sent) => (sent, false),
            },
        })
    };
    let (sent, live) = in_span!(span, sending).inspect_err(|err| {
        span.failed(|| err.to_string());
    })?;
    span.set(|| {
        vec![attr(
            "baton.platform_message_id",
            sent.message_id.as_str().to_owned(),
        )]
    });
    drop(span);
    let members = if handover.is_empty() {
        Vec::new()
    } else {
        handover.members(&message.chat).await
    };
    let events = handover.events(&members, &message, &sent.message_id);
    let (events, filings) = Handover::filings(events);
    let filed = pen
        .delivered(
            &message.text,
            sent.message_id.as_str(),
            &message.idempotency_key,
            filings,
        )
        .await;
    handover.run(events, filed);
    Ok(if live {
        Posted::Live(sent.message_id)
    } else {
        Posted::Now(sent.message_id)
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use baton_contract::{ConnectionState, Platform, SendError, SentMessage, StubAdapter};

    use super::*;
    use crate::store::{Store, TranscriptQuery};

    /// Answers each send with the next of `results` and records what it was asked to post.
    fn scripted(results: Vec<Result<SentMessage, SendError>>) -> StubAdapter {
        StubAdapter::new(Platform::Local, "a")
            .max_message_chars(10)
            .threads()
            .in_state(ConnectionState::Connected)
            .answering(results)
    }

    fn ok(id: &str) -> Result<SentMessage, SendError> {
        Ok(SentMessage {
            message_id: MessageId::from(id),
        })
    }

    fn target() -> Target {
        Target {
            chat: "c".into(),
            thread: Some("t".into()),
            reply_to: None,
            ephemeral: None,
        }
    }

    async fn pen() -> Pen {
        let store = Store::open(":memory:").await.unwrap();
        let events = crate::events::Events::default();
        let session = crate::session::test_key("s");
        Pen::new(store, events, session, "run1".into())
    }

    #[tokio::test]
    async fn a_429_is_retried_after_retry_after_and_chunks_keep_their_keys() {
        let adapter = scripted(vec![
            Err(SendError::RateLimited {
                retry_after: Duration::from_millis(5),
            }),
            ok("m1"),
            ok("m2"),
        ]);
        let pen = pen().await;
        let ids = deliver(&adapter, &Handover::none(), &target(), "hello there", &pen)
            .await
            .unwrap();
        assert_eq!(ids, [MessageId::from("m1"), MessageId::from("m2")]);
        let sent = adapter.sent();
        let keys: Vec<_> = sent.iter().map(|m| m.idempotency_key.as_str()).collect();
        assert_eq!(
            keys,
            ["run1#0", "run1#0", "run1#1"],
            "a retry must reuse its key"
        );
        assert!(
            sent.iter()
                .all(|m| m.thread.as_ref().is_some_and(|t| t.as_str() == "t"))
        );
        // The last chunk's record is queued, not waited for: a job after it commits after it.
        pen.store().write(|_| Ok(())).await.unwrap();
        let entries = pen
            .store()
            .transcript(TranscriptQuery::session(crate::session::test_key("s")))
            .await
            .unwrap();
        let ids: Vec<_> = entries
            .iter()
            .map(|e| e.platform_message_id.clone())
            .collect();
        assert_eq!(ids, [Some("m1".to_owned()), Some("m2".to_owned())]);
    }

    #[tokio::test]
    async fn a_transport_failure_is_not_retried_and_a_replay_posts_nothing_twice() {
        let adapter = scripted(vec![ok("m1"), Err(SendError::Transport("reset".into()))]);
        let pen = pen().await;
        let err = deliver(&adapter, &Handover::none(), &target(), "hello there", &pen)
            .await
            .unwrap_err();
        assert_eq!((err.chunk, err.total), (1, 2));
        assert_eq!(adapter.sent().len(), 2, "retried an unknown fate");

        // The transport failure's fate is unknown: a replay posts neither the delivered chunk
        // nor the one that may have gone out.
        let replay = scripted(vec![ok("m2")]);
        let err = deliver(&replay, &Handover::none(), &target(), "hello there", &pen)
            .await
            .unwrap_err();
        assert!(matches!(err.cause, Undelivered::Interrupted), "{err}");
        assert_eq!(err.chunk, 1);
        assert!(replay.sent().is_empty(), "posted again");
    }

    /// A chunk no other bot is handed is recorded behind the post: the caller goes on (and lets
    /// its lane go) while the writer is still busy, and the record lands in order after it.
    #[tokio::test]
    async fn a_chunk_is_recorded_without_waiting_for_its_commit() {
        let pen = pen().await;
        let store = pen.store().clone();
        let held = crate::store::testing::hold(&store).await.running().await;
        let filed = tokio::time::timeout(
            Duration::from_secs(10),
            pen.delivered("posted", "m9", "run1#0", Vec::new()),
        )
        .await
        .expect("the record waited for the held writer");
        assert!(filed.is_empty());
        held.let_go();
        held.committed().await;
        store.write(|_| Ok(())).await.unwrap();
        let entries = store
            .transcript(TranscriptQuery::session(crate::session::test_key("s")))
            .await
            .unwrap();
        let posted: Vec<_> = entries
            .iter()
            .map(|e| (e.text.as_str(), e.idempotency_key.as_deref()))
            .collect();
        assert_eq!(posted, [("posted", Some("run1#0"))]);
    }
}
