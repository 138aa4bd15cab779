//! Posting a reply while it is written: one post edited in place as the text grows, a new
//! post when the text outgrows the platform's limit, and a last pass that makes the posts hold
//! exactly the finished reply.
//!
//! The posts are always `split(text)` of some text (the same chunking as a whole reply), so a
//! post is closed at a paragraph, line or code-fence boundary with its fences balanced, and the
//! finished posts are exactly the chunks a whole reply would have had. Post `n` carries the
//! idempotency key `<run id>#<n>` like any chunk and is recorded in the transcript as soon as it
//! is made; a crash mid-stream therefore leaves the posts made so far on record, and a replay
//! of the run edits them (or gives up) instead of posting the reply again. The last pass
//! records each post's final text.
//!
//! Edits go out one at a time from one task, so they can never overtake each other; a 429 is
//! waited out (its `Retry-After`) and then the newest text is sent. Where a platform caps how
//! often a message may be edited (Feishu: 20), the stream stops editing a post one edit short
//! of the cap, keeping the last edit for the finished text.

use baton_contract::{Adapter, EditMessage, MessageId};

use super::send::{Posted, post_chunk, with_retry};
use super::{DeliveryFailed, Target, Undelivered, split};
use crate::mirror::Journal;

/// One post of the stream.
#[derive(Debug)]
struct Post {
    id: MessageId,
    /// What the chat shows; `None` for a post made by an earlier attempt of the run.
    shown: Option<String>,
    edits: u32,
    /// Made by this attempt, so its transcript entry holds a draft until the last pass.
    recorded_draft: bool,
}

/// The posts of one streamed reply.
pub struct Streamer<'a> {
    adapter: &'a dyn Adapter,
    target: &'a Target,
    journal: &'a Journal,
    limit: usize,
    posts: Vec<Post>,
}

impl<'a> Streamer<'a> {
    /// A stream of posts to `target` through `adapter`, recorded in `journal`'s run.
    pub fn new(adapter: &'a dyn Adapter, target: &'a Target, journal: &'a Journal) -> Self {
        Self {
            adapter,
            target,
            journal,
            limit: adapter.capabilities().max_message_chars,
            posts: Vec::new(),
        }
    }

    /// Whether anything has been posted yet.
    pub fn has_posted(&self) -> bool {
        !self.posts.is_empty()
    }

    /// Make the chat show `text` (the certain part of the reply so far). A post or edit that
    /// fails is logged and left to the last pass; only a post that must not be retried (an
    /// earlier attempt was cut off mid-post) stops the stream.
    pub async fn show(&mut self, text: &str) -> Result<(), DeliveryFailed> {
        if text.is_empty() {
            return Ok(());
        }
        let chunks = split(text, self.limit);
        let total = chunks.len();
        for (n, chunk) in chunks.into_iter().enumerate() {
            let closing = n + 1 < total;
            if let Err(cause) = self.put(n, chunk, Pass::Streaming { closing }).await {
                if matches!(cause, Undelivered::Interrupted) {
                    return Err(DeliveryFailed {
                        chunk: n,
                        total,
                        cause,
                    });
                }
                tracing::warn!(session = self.journal.session(), chunk = n, err = %cause, "a streamed post or edit failed; the finished reply will try again");
                break;
            }
        }
        Ok(())
    }

    /// Make the posts hold exactly the finished reply `text`, and record each post's final
    /// text. Returns the platform ids.
    pub async fn finish(&mut self, text: &str) -> Result<Vec<MessageId>, DeliveryFailed> {
        let chunks = split(text, self.limit);
        let total = chunks.len();
        for (n, chunk) in chunks.into_iter().enumerate() {
            self.put(n, chunk.clone(), Pass::Last)
                .await
                .map_err(|cause| DeliveryFailed {
                    chunk: n,
                    total,
                    cause,
                })?;
            let post = &mut self.posts[n];
            if post.recorded_draft {
                let key = format!("{}#{n}", self.journal.run_id());
                if let Err(err) = self.journal.store().revise_delivered(&key, &chunk).await {
                    tracing::error!(%err, key, "could not record a streamed post's final text");
                }
                post.recorded_draft = false;
            }
        }
        if self.posts.len() > total {
            // Text the model took back (it went on to call tools) outgrew the reply.
            tracing::warn!(
                session = self.journal.session(),
                extra = self.posts.len() - total,
                "a streamed draft had more posts than the reply; they keep the draft's text"
            );
        }
        Ok(self.posts.iter().map(|p| p.id.clone()).collect())
    }

    /// Post chunk `n`, or edit its post to `text` if the pass allows an edit now.
    async fn put(&mut self, n: usize, text: String, pass: Pass) -> Result<(), Undelivered> {
        let Some(post) = self.posts.get(n) else {
            let posted = post_chunk(self.adapter, self.target, self.journal, n, text.clone());
            let post = match posted.await? {
                Posted::Now(id) => Post {
                    id,
                    shown: Some(text),
                    edits: 0,
                    recorded_draft: true,
                },
                Posted::Before(id) => Post {
                    id,
                    shown: None,
                    edits: 0,
                    recorded_draft: false,
                },
            };
            self.posts.push(post);
            return Ok(());
        };
        if post.shown.as_deref() == Some(text.as_str()) || post.id.as_str().is_empty() {
            return Ok(());
        }
        let cap = self.adapter.max_edits();
        let allowed = match (pass, cap) {
            (Pass::Last, _) | (Pass::Streaming { .. }, None) => true,
            // The post is final from here on: spend an edit on it if any is left.
            (Pass::Streaming { closing: true }, Some(cap)) => post.edits < cap,
            // Keep the last edit for the finished text.
            (Pass::Streaming { closing: false }, Some(cap)) => post.edits + 1 < cap,
        };
        if !allowed {
            return Ok(());
        }
        let edit = EditMessage {
            chat: self.target.chat.clone(),
            thread: self.target.thread.clone(),
            message_id: post.id.clone(),
            text,
        };
        with_retry(|| self.adapter.edit(&edit)).await?;
        let post = &mut self.posts[n];
        post.shown = Some(edit.text);
        post.edits += 1;
        Ok(())
    }
}

/// Which pass a post or edit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// While the model writes; `closing`: the post is full and gets its final text.
    Streaming { closing: bool },
    /// The finished reply.
    Last,
}
