//! A reply bounded before it is posted: a backend can answer anything (an `http` agent, a
//! `command`), and a reply of megabytes would otherwise go into the chat as thousands of posts.
//!
//! A reply over `[limits] max_reply_bytes`, or one that would make more than `[limits]
//! max_posts_per_reply` posts on its chat's platform, is cut at a post's end (`posts_end`), and
//! the chat gets that start plus a note. Nothing is lost: the whole reply is kept as an
//! artifact of the run (under `[artifacts] max_bytes`), attached as a file where the platform
//! takes one that big, else named with its link in the note. The chunking this takes runs on
//! a blocking thread, never on the reactor, so no reply delays any request.

use super::Engine;
use super::journal::Journal;
use super::reply_files::attach;
use crate::post::posts_end;
use crate::store::{NewArtifact, Put, StoreError, content_path};
use crate::timing::now_ms;

/// Name and media type of the artifact a cut reply is kept as.
const KEPT_NAME: &str = "reply.md";
const KEPT_TYPE: &str = "text/markdown";

/// `text` as the chat may get it: itself when it is within bounds, else its start and a note
/// saying where the whole of it is.
pub(super) async fn bound(engine: &Engine, journal: &Journal, text: String) -> String {
    let limits = &engine.config().limits;
    let (max_bytes, max_posts) = (limits.max_reply_bytes, limits.max_posts_per_reply);
    let session = journal.session();
    let account = engine.roster().account(session.platform, &session.account);
    let chars = account.map(|a| a.adapter.capabilities().max_message_chars);
    // Bytes are never fewer than chars: a reply this short makes one post.
    if text.len() <= max_bytes && chars.is_none_or(|c| text.len() <= c) {
        return text;
    }
    let cut = tokio::task::spawn_blocking(move || {
        let keep = cut_point(&text, max_bytes, chars, max_posts);
        (text, keep)
    })
    .await;
    let (text, keep) = match cut {
        Ok(cut) => cut,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    };
    let Some(keep) = keep else {
        return text;
    };
    let bytes = text.len();
    let start = text[..keep].trim_end().to_owned();
    let note = match keep_whole(engine, journal, text).await {
        Ok(Kept::Attached(id)) => format!(
            "… the reply goes on: all {bytes} bytes of it are attached as {KEPT_NAME} (artifact \
             {id}, {}).",
            content_path(&id)
        ),
        Ok(Kept::Linked(id)) => format!(
            "… the reply goes on: all {bytes} bytes of it are kept as artifact {id} ({}).",
            content_path(&id)
        ),
        Ok(Kept::TooBig(cap)) => format!(
            "… the reply was cut here: it is {bytes} bytes, more than a chat gets and more than \
             an artifact may hold ({cap} bytes)."
        ),
        Err(err) => {
            tracing::error!(session = %journal.session(), %err, "could not keep a cut reply as an artifact");
            format!(
                "… the reply was cut here: it is {bytes} bytes, more than a chat gets, and it \
                 could not be kept as an artifact."
            )
        }
    };
    tracing::warn!(session = %journal.session(), bytes, kept = keep, "a reply over its bounds was cut");
    if start.is_empty() {
        note
    } else {
        format!("{start}\n\n{note}")
    }
}

/// Where `text` must be cut (a byte offset), when it is over `max_bytes` or would make more
/// than `max_posts` posts of `chars` characters; the start kept leaves room for the note's
/// post. `None` when it is within bounds.
fn cut_point(
    text: &str,
    max_bytes: usize,
    chars: Option<usize>,
    max_posts: usize,
) -> Option<usize> {
    let mut head = max_bytes.min(text.len());
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let head_text = &text[..head];
    let Some(chars) = chars else {
        return (head < text.len()).then_some(head);
    };
    if head == text.len() && posts_end(head_text, chars, max_posts).is_none() {
        return None;
    }
    Some(posts_end(head_text, chars, max_posts.saturating_sub(1)).unwrap_or(head))
}

/// How a cut reply was kept.
enum Kept {
    /// As an artifact attached to the reply (posted as a file after the text).
    Attached(String),
    /// As an artifact, named in the note (the platform takes no file that big).
    Linked(String),
    /// Not at all: it is over `[artifacts] max_bytes`, this cap.
    TooBig(u64),
}

/// Keep `text` whole as an artifact of the journal's run, attached to its reply where the
/// platform takes a file that big.
async fn keep_whole(engine: &Engine, journal: &Journal, text: String) -> Result<Kept, StoreError> {
    let cap = engine.config().artifacts.max_bytes;
    if text.len() as u64 > cap {
        return Ok(Kept::TooBig(cap));
    }
    let session = journal.session();
    let new = NewArtifact {
        name: KEPT_NAME.to_owned(),
        media_type: KEPT_TYPE.to_owned(),
        content: text.into_bytes(),
        bot: session.bot.clone(),
        session: session.clone(),
        run_id: Some(journal.run_id().to_owned()),
        inputs: Vec::new(),
        created_ms: now_ms(),
    };
    let artifact = match engine.store().artifact_put(new).await? {
        Put::Stored(artifact) => artifact,
        Put::UnknownInputs(unknown) => {
            return Err(StoreError::Internal(format!(
                "a cut reply's artifact was refused for unknown inputs {unknown:?}"
            )));
        }
    };
    let takes_files = engine
        .roster()
        .account(session.platform, &session.account)
        .and_then(|a| a.adapter.max_upload_bytes())
        .is_some_and(|limit| artifact.bytes <= limit);
    if !takes_files {
        return Ok(Kept::Linked(artifact.id));
    }
    journal.attaches_files();
    match attach(engine, session, journal.run_id(), vec![artifact.id.clone()]).await {
        Ok(_) => Ok(Kept::Attached(artifact.id)),
        Err(refused) => {
            tracing::warn!(%refused, "a cut reply's artifact was not attached; its link is in the note");
            Ok(Kept::Linked(artifact.id))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cut_point;

    #[test]
    fn a_reply_within_bounds_is_not_cut() {
        assert_eq!(cut_point("short", 100, Some(10), 3), None);
        assert_eq!(cut_point("aaaa bbbb cccc", 100, Some(4), 3), None);
    }

    #[test]
    fn a_reply_of_too_many_posts_keeps_room_for_the_note() {
        let text = "aaaa bbbb cccc dddd";
        assert_eq!(cut_point(text, 100, Some(4), 3), Some(9));
    }

    #[test]
    fn a_reply_over_the_byte_cap_is_cut_on_a_char_boundary() {
        let text = "😀".repeat(10);
        assert_eq!(cut_point(&text, 6, None, 20), Some(4));
        assert_eq!(cut_point(&text, 6, Some(1000), 20), Some(4));
    }
}
