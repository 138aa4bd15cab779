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
//!
//! With `stream = "native"` where the platform streams itself ([`Streamer::streaming_for`]),
//! each post is started as a live stream: while it is the growing end of the reply it is
//! updated with what it adds (no edit cap), and it is ended once with its final text, when it
//! is full or the reply is finished. Text that does not only add (a draft taken back) waits
//! for that end. A platform that refuses the stream gets an ordinary post, edited as above.
//!
//! Text shown before the model called tools is a draft, not the reply: the last pass edits the
//! posts to the reply, and posts the reply does not need (the draft was longer) are deleted,
//! as are all of them when the turn ends silent or its flow refuses the reply
//! ([`Streamer::withdraw`]).

use baton_contract::{
    Adapter, DeleteMessage, EditMessage, MessageId, Preview, StreamFor, StreamText,
};

use super::attempt::{DeliveryFailed, Target, Undelivered, with_retry};
use super::files::post_files;
use super::handover::Handover;
use super::send::{Posted, Via, post_chunk};
use super::split;
use crate::pen::Pen;

/// One post of the stream.
#[derive(Debug)]
struct Post {
    id: MessageId,
    /// What the chat shows; `None` for a post made by an earlier attempt of the run.
    shown: Option<String>,
    edits: u32,
    /// Its transcript entry may hold a draft until the last pass.
    recorded_draft: bool,
    /// A live stream of the platform's own, to be updated and ended with the stream calls.
    live: bool,
}

/// The posts of one streamed reply.
pub struct Streamer<'a> {
    adapter: &'a dyn Adapter,
    /// Who else is handed each post as it is first made (where the platform does not).
    handover: Handover,
    target: &'a Target,
    pen: &'a Pen,
    limit: usize,
    posts: Vec<Post>,
    /// Told each post's text before it is made (a chain's posts must wake no bot).
    before_post: Option<&'a (dyn Fn(&str) + Sync)>,
    /// The reply is shown as a preview that is no post (`stream = "native"` where the platform
    /// has one): its draft id, and whether it has been shown. Nothing is posted before
    /// [`Streamer::finish`], which posts the reply as a whole reply is posted.
    preview: Option<(u32, bool)>,
    /// Each post is a live stream of the platform's own, for this person.
    native: Option<StreamFor>,
    /// The reply's bounds (`[limits] max_reply_bytes`, `max_posts_per_reply`): while it is
    /// written, no more is shown than the bounded reply can keep.
    max_bytes: usize,
    max_posts: usize,
}

impl<'a> Streamer<'a> {
    /// A stream of posts to `target` through `adapter`, recorded in `pen`'s run and handed
    /// to the bots of `handover`.
    pub fn new(
        adapter: &'a dyn Adapter,
        handover: Handover,
        target: &'a Target,
        pen: &'a Pen,
    ) -> Self {
        Self {
            adapter,
            handover,
            target,
            pen,
            limit: adapter.capabilities().max_message_chars,
            posts: Vec::new(),
            before_post: None,
            preview: None,
            native: None,
            max_bytes: usize::MAX,
            max_posts: usize::MAX,
        }
    }

    /// Show no more while the reply is written than a reply within `max_bytes` and
    /// `max_posts` posts keeps: its first `max_bytes`, in at most `max_posts - 1` posts (a cut
    /// reply's note takes the last post; `engine/reply_bound.rs`).
    pub fn bounded(mut self, max_bytes: usize, max_posts: usize) -> Self {
        self.max_bytes = max_bytes;
        self.max_posts = max_posts;
        self
    }

    /// Start each post as a live stream for `to` where the platform streams replies itself
    /// (`stream = "native"`, [`Adapter::streams_in`]).
    pub fn streaming_for(mut self, to: StreamFor) -> Self {
        self.native = Some(to);
        self
    }

    /// Show the reply as a preview (the adapter's [`Adapter::preview`]) rather than in posts
    /// edited in place; one draft id per run, the same after a restart.
    pub fn previewing(mut self) -> Self {
        self.preview = Some((draft_id(self.pen.run_id()), false));
        self
    }

    /// Tell `before_post` each post's text before the post is made.
    pub fn before_post(mut self, before_post: Option<&'a (dyn Fn(&str) + Sync)>) -> Self {
        self.before_post = before_post;
        self
    }

    /// Whether anything has been posted yet.
    pub fn has_posted(&self) -> bool {
        !self.posts.is_empty() || matches!(self.preview, Some((_, true)))
    }

    /// Make the chat show `text` (the certain part of the reply so far). A post or edit that
    /// fails is logged and left to the last pass; only a post that must not be retried (an
    /// earlier attempt was cut off mid-post) stops the stream.
    pub async fn show(&mut self, text: &str) -> Result<(), DeliveryFailed> {
        // Past the bounds nothing more is shown: the finished reply is cut there anyway.
        let mut end = text.len().min(self.max_bytes);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let text = &text[..end];
        if text.is_empty() {
            return Ok(());
        }
        let mut chunks = split(text, self.limit);
        chunks.truncate(self.max_posts.saturating_sub(1));
        if chunks.is_empty() {
            return Ok(());
        }
        if let Some((draft_id, shown)) = &mut self.preview {
            // A preview shows the reply's first post; the rest arrives with the finished reply.
            let preview = Preview {
                chat: self.target.chat.clone(),
                thread: self.target.thread.clone(),
                draft_id: *draft_id,
                text: chunks.into_iter().next().unwrap_or_default(),
            };
            match with_retry(|| self.adapter.preview(&preview)).await {
                Ok(()) => *shown = true,
                Err(err) => {
                    tracing::warn!(session = %self.pen.session(), %err, "a preview of the reply failed; the finished reply is posted anyway")
                }
            }
            return Ok(());
        }
        let total = chunks.len();
        for (n, chunk) in chunks.into_iter().enumerate() {
            // The last post shown is not final yet: the reply's growing end, or where its bounds
            // stop it (the last pass puts the cut reply's end and note there).
            let closing = n + 1 < total;
            if let Err(cause) = self.put(n, chunk, Pass::Streaming { closing }).await {
                if matches!(cause, Undelivered::Interrupted) {
                    return Err(DeliveryFailed {
                        chunk: n,
                        total,
                        file: None,
                        cause,
                    });
                }
                tracing::warn!(session = %self.pen.session(), chunk = n, err = %cause, "a streamed post or edit failed; the finished reply will try again");
                break;
            }
        }
        Ok(())
    }

    /// Make the posts hold exactly the finished reply `text`, record each post's final text,
    /// then post the files the run attached (an empty `text`: only those). Returns the
    /// platform ids.
    pub async fn finish(&mut self, text: &str) -> Result<Vec<MessageId>, DeliveryFailed> {
        let chunks = if text.is_empty() {
            Vec::new()
        } else {
            split(text, self.limit)
        };
        let total = chunks.len();
        for (n, chunk) in chunks.into_iter().enumerate() {
            self.put(n, chunk.clone(), Pass::Last)
                .await
                .map_err(|cause| DeliveryFailed {
                    chunk: n,
                    total,
                    file: None,
                    cause,
                })?;
            let post = &mut self.posts[n];
            if post.recorded_draft {
                let key = format!("{}#{n}", self.pen.run_id());
                if let Err(err) = self.pen.store().revise_delivered(&key, &chunk).await {
                    tracing::error!(%err, key, "could not record a streamed post's final text");
                }
                post.recorded_draft = false;
            }
        }
        // Text the model took back (it went on to call tools) outgrew the reply: the posts
        // the reply does not need are deleted, not left showing the draft.
        self.delete_from(total, "a draft the model took back before calling tools")
            .await;
        let mut ids: Vec<MessageId> = self.posts.iter().map(|p| p.id.clone()).collect();
        ids.extend(post_files(self.adapter, self.target, self.pen, total).await?);
        Ok(ids)
    }

    /// Delete every post of the stream: the turn ended silent after a draft was shown, or its
    /// flow refused the reply (`why`). Each deletion is
    /// recorded on the post's transcript entry; a post that cannot be deleted keeps its text
    /// (logged, and recorded as the text it shows).
    pub async fn withdraw(&mut self, why: &str) {
        self.delete_from(0, why).await;
    }

    /// Delete the posts from the `keep`-th on.
    async fn delete_from(&mut self, keep: usize, why: &str) {
        let keep = keep.min(self.posts.len());
        let gone: Vec<Post> = self.posts.drain(keep..).collect();
        for (n, post) in (keep..).zip(gone) {
            let key = format!("{}#{n}", self.pen.run_id());
            let message = DeleteMessage {
                chat: self.target.chat.clone(),
                thread: self.target.thread.clone(),
                message_id: post.id.clone(),
            };
            let store = self.pen.store();
            let recorded = match with_retry(|| self.adapter.delete(&message)).await {
                Ok(()) => store.withdraw_delivered(&key, why).await,
                Err(err) => {
                    tracing::warn!(session = %self.pen.session(), chunk = n, %err, "could not delete a streamed post the reply does not need; it stays in the chat");
                    match (&post.shown, post.recorded_draft) {
                        (Some(shown), true) => store.revise_delivered(&key, shown).await,
                        _ => Ok(()),
                    }
                }
            };
            if let Err(err) = recorded {
                tracing::error!(%err, key, "could not record what became of a streamed post");
            }
        }
    }

    /// Post chunk `n`, or edit its post to `text` if the pass allows an edit now.
    async fn put(&mut self, n: usize, text: String, pass: Pass) -> Result<(), Undelivered> {
        let Some(post) = self.posts.get(n) else {
            if let Some(before_post) = self.before_post {
                before_post(&text);
            }
            let via = self.native.as_ref().map_or(Via::Post, Via::Stream);
            let posted = post_chunk(
                self.adapter,
                &self.handover,
                self.target,
                self.pen,
                n,
                text.clone(),
                via,
            );
            let (id, shown, live) = match posted.await? {
                Posted::Now(id) => (id, Some(text), false),
                Posted::Live(id) => (id, Some(text), true),
                // Made and recorded by an attempt a crash cut off: its entry gets the final
                // text (a stream it started is ended, or edited where it ended already).
                Posted::Before(id) => (id, None, self.native.is_some()),
            };
            let post = Post {
                id,
                shown,
                edits: 0,
                recorded_draft: true,
                live,
            };
            self.posts.push(post);
            return Ok(());
        };
        if post.live && !post.id.as_str().is_empty() {
            return self.put_live(n, text, pass).await;
        }
        if post.shown.as_deref() == Some(text.as_str()) || post.id.as_str().is_empty() {
            return Ok(());
        }
        let cap = self.adapter.max_edits();
        let allowed = match (pass, cap) {
            (_, None) => true,
            // The post's text is final: spend an edit on it if any is left.
            (Pass::Last | Pass::Streaming { closing: true }, Some(cap)) => post.edits < cap,
            // Keep the last edit for the finished text.
            (Pass::Streaming { closing: false }, Some(cap)) => post.edits + 1 < cap,
        };
        if !allowed {
            if pass == Pass::Last {
                tracing::warn!(
                    session = %self.pen.session(),
                    chunk = n,
                    "a streamed post used up its edits; it keeps the text it has"
                );
            }
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

    /// Update live stream `n` with what `text` adds, or end it showing `text` once the post
    /// is final.
    async fn put_live(&mut self, n: usize, text: String, pass: Pass) -> Result<(), Undelivered> {
        let post = &self.posts[n];
        let stream = StreamText {
            chat: self.target.chat.clone(),
            thread: self.target.thread.clone(),
            message_id: post.id.clone(),
            shown: post.shown.clone(),
            text,
        };
        match pass {
            Pass::Streaming { closing: false } => {
                // Text that does not only add waits for the stream's end.
                if stream.added().is_none_or(str::is_empty) {
                    return Ok(());
                }
                with_retry(|| self.adapter.stream_update(&stream)).await?;
            }
            Pass::Streaming { closing: true } | Pass::Last => {
                with_retry(|| self.adapter.stream_end(&stream)).await?;
                self.posts[n].live = false;
            }
        }
        self.posts[n].shown = Some(stream.text);
        Ok(())
    }
}

/// A non-zero draft id from a run id (FNV-1a): the same for every attempt of the run.
fn draft_id(run_id: &str) -> u32 {
    let hash = run_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash.max(1)
}

/// Which pass a post or edit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// While the model writes; `closing`: the post is full and gets its final text.
    Streaming { closing: bool },
    /// The finished reply.
    Last,
}

#[cfg(test)]
mod tests {
    use baton_contract::{ConnectionState, Platform, StubAdapter};

    use super::*;
    use crate::store::{Store, TranscriptQuery};

    #[tokio::test]
    async fn posts_split_at_the_limit_keep_an_edit_for_the_final_text_and_record_it() {
        // A platform that allows 3 edits per message.
        let adapter = StubAdapter::new(Platform::Local, "a")
            .max_message_chars(30)
            .threads()
            .editable(3)
            .in_state(ConnectionState::Connected);
        let store = Store::open(":memory:").await.unwrap();
        let pen = Pen::new(
            store,
            crate::events::Events::default(),
            crate::session::test_key("s"),
            "run1".into(),
        );
        let target = Target {
            chat: "c".into(),
            thread: None,
            reply_to: None,
            ephemeral: None,
        };
        let reply = "first line of it\nsecond line here\nthird and last";
        let mut streamer = Streamer::new(&adapter, Handover::none(), &target, &pen);
        for end in (4..reply.len()).step_by(3) {
            streamer.show(&reply[..end]).await.unwrap();
        }
        let ids = streamer.finish(reply).await.unwrap();
        assert_eq!(ids.len(), split(reply, 30).len());
        let shown: Vec<String> = adapter.shown().into_iter().map(|(_, text)| text).collect();
        assert_eq!(shown, split(reply, 30), "{:?}", adapter.calls());
        let entries = pen
            .store()
            .transcript(TranscriptQuery::session(crate::session::test_key("s")))
            .await
            .unwrap();
        let recorded: Vec<&str> = entries.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            recorded,
            split(reply, 30),
            "each post's final text on record"
        );
    }
}
