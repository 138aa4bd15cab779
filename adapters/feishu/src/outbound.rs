//! Posting one chunk: a reply to the triggering message, inside its topic thread when it was in
//! one.
//!
//! The gateway has already split the reply to 4000 characters and retries a rate limit itself;
//! this module makes exactly one request per call. Each chunk carries a `uuid` derived from the
//! gateway's idempotency key, and Feishu posts at most one message per `uuid` within an hour, so
//! even a retried send cannot post twice. The ids this account posted are remembered (a bounded
//! set), so a user's reply to one of them counts as addressing the bot.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use baton_contract::{
    DeleteMessage, EditMessage, MessageId, OutboundFile, OutboundMessage, SendError, SentMessage,
    Typing, TypingTarget,
};
use sha2::{Digest, Sha256};

use crate::api::{Api, ApiError, Content};

/// How many posted message ids are remembered.
const REMEMBERED: usize = 2048;

/// Post `message` once.
pub(crate) async fn send(
    api: &Api,
    posted: &Posted,
    message: &OutboundMessage,
) -> Result<SentMessage, SendError> {
    send_as(api, posted, message, &Content::text(&message.text)).await
}

/// Post `message` once, shown as `content`.
pub(crate) async fn send_as(
    api: &Api,
    posted: &Posted,
    message: &OutboundMessage,
    content: &Content,
) -> Result<SentMessage, SendError> {
    let uuid = uuid_for(&message.idempotency_key);
    let thread = message.thread.as_ref().map(|t| t.as_str());
    // A topic thread id (`omt_…`) cannot be replied to, but a reply into a topic asks for
    // `reply_in_thread`; a reply chain's root (`om_…`) can be, when no message is named.
    let in_topic = thread.is_some_and(|t| t.starts_with("omt_"));
    let target = message
        .reply_to
        .as_ref()
        .map(|m| m.as_str())
        .or(thread.filter(|t| t.starts_with("om_")));
    let sent = match target {
        Some(id) => api.reply_with(id, content, in_topic, &uuid).await,
        None => api.create_with(message.chat.as_str(), content, &uuid).await,
    }
    .map_err(send_error)?;
    posted.remember(&sent);
    Ok(SentMessage {
        message_id: MessageId(sent),
    })
}

/// Feishu's limit for an uploaded file (30 MB); an image over its own 10 MB limit is sent as a
/// file instead.
pub(crate) const MAX_UPLOAD_BYTES: u64 = 30 * 1024 * 1024;
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

/// Post `file` once: uploaded as an image or a file, then sent as an `image`/`file` message
/// where the text goes (the same reply, topic thread and `uuid` rules as a chunk, so a retried
/// send cannot post it twice).
pub(crate) async fn upload(
    api: &Api,
    posted: &Posted,
    file: &OutboundFile,
) -> Result<SentMessage, SendError> {
    let image = file.is_image() && (file.content.len() as u64) <= MAX_IMAGE_BYTES;
    let content = api
        .upload(&file.name, &file.media_type, image, &file.content)
        .await
        .map_err(send_error)?;
    let uuid = uuid_for(&file.idempotency_key);
    let thread = file.thread.as_ref().map(|t| t.as_str());
    let in_topic = thread.is_some_and(|t| t.starts_with("omt_"));
    let target = file
        .reply_to
        .as_ref()
        .map(|m| m.as_str())
        .or(thread.filter(|t| t.starts_with("om_")));
    let sent = match target {
        Some(id) => api.reply_with(id, &content, in_topic, &uuid).await,
        None => api.create_with(file.chat.as_str(), &content, &uuid).await,
    }
    .map_err(send_error)?;
    posted.remember(&sent);
    Ok(SentMessage {
        message_id: MessageId(sent),
    })
}

/// How many times Feishu lets one message be edited.
pub(crate) const MAX_EDITS: u32 = 20;

/// The reaction that says "working on it" (Feishu's emoji type `Typing`).
const TYPING_EMOJI: &str = "Typing";

/// Replace the text of a text message this app posted, once.
pub(crate) async fn edit(api: &Api, edit: &EditMessage) -> Result<(), SendError> {
    api.update_text(edit.message_id.as_str(), &edit.text)
        .await
        .map_err(send_error)
}

/// Recall (delete) a message this app posted, once.
pub(crate) async fn delete(api: &Api, message: &DeleteMessage) -> Result<(), SendError> {
    api.delete_message(message.message_id.as_str())
        .await
        .map_err(send_error)
}

/// Put the typing reaction on the message being answered.
pub(crate) async fn typing_start(
    api: &Api,
    at: &TypingTarget,
) -> Result<Option<Typing>, SendError> {
    let reaction = api
        .add_reaction(at.message.as_str(), TYPING_EMOJI)
        .await
        .map_err(send_error)?;
    Ok(Some(Typing {
        renew_every: None,
        handle: Some(reaction).filter(|r| !r.is_empty()),
    }))
}

/// Take the typing reaction away again.
pub(crate) async fn typing_stop(
    api: &Api,
    at: &TypingTarget,
    typing: &Typing,
) -> Result<(), SendError> {
    let Some(reaction) = &typing.handle else {
        return Ok(());
    };
    api.delete_reaction(at.message.as_str(), reaction)
        .await
        .map_err(send_error)
}

/// Map a failed post onto the contract: only a rate limit is known to have posted nothing.
pub(crate) fn send_error(err: ApiError) -> SendError {
    match err {
        ApiError::RateLimited(retry_after) => SendError::RateLimited { retry_after },
        ApiError::Feishu { code, msg } => SendError::Rejected {
            code: code.to_string(),
            message: msg,
        },
        ApiError::Auth(why) => SendError::Rejected {
            code: "auth".into(),
            message: format!("the app credentials were refused ({why})"),
        },
        ApiError::Http(status) if status < 500 => SendError::Rejected {
            code: format!("http_{status}"),
            message: "Feishu refused the request".into(),
        },
        other => SendError::Transport(other.to_string()),
    }
}

/// A Feishu `uuid` (at most 50 characters) for an idempotency key of any length: the key's
/// SHA-256, laid out like a UUID. The same key always gives the same `uuid`.
pub(crate) fn uuid_for(key: &str) -> String {
    let hex: String = Sha256::digest(key.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The ids of messages this account posted, newest last, at most [`REMEMBERED`].
#[derive(Default)]
pub(crate) struct Posted {
    inner: Mutex<(VecDeque<String>, HashSet<String>)>,
}

impl Posted {
    fn remember(&self, id: &str) {
        if id.is_empty() {
            return;
        }
        let mut guard = self.inner.lock().expect("posted lock poisoned");
        let (order, set) = &mut *guard;
        if set.insert(id.to_owned()) {
            order.push_back(id.to_owned());
            if order.len() > REMEMBERED
                && let Some(old) = order.pop_front()
            {
                set.remove(&old);
            }
        }
    }

    /// Whether this account posted `id` (recently).
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.inner
            .lock()
            .expect("posted lock poisoned")
            .1
            .contains(id)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn uuids_are_stable_short_and_distinct_per_chunk() {
        let key = "turn:feishu:snark:om_5ce6d572455d361153b7cb51da133945";
        let a = uuid_for(&format!("{key}#0"));
        assert_eq!(a, uuid_for(&format!("{key}#0")));
        assert_ne!(a, uuid_for(&format!("{key}#1")));
        assert_eq!(a.len(), 36);
        assert!(a.len() <= 50);
    }

    #[test]
    fn errors_map_to_the_contract() {
        assert!(matches!(
            send_error(ApiError::RateLimited(Duration::from_secs(2))),
            SendError::RateLimited { retry_after } if retry_after == Duration::from_secs(2)
        ));
        assert!(matches!(
            send_error(ApiError::Feishu { code: 230002, msg: "bot not in chat".into() }),
            SendError::Rejected { code, .. } if code == "230002"
        ));
        assert!(matches!(
            send_error(ApiError::Http(502)),
            SendError::Transport(_)
        ));
        assert!(matches!(
            send_error(ApiError::Transport("reset".into())),
            SendError::Transport(_)
        ));
    }

    #[test]
    fn posted_ids_are_remembered_up_to_a_bound() {
        let posted = Posted::default();
        for n in 0..=REMEMBERED {
            posted.remember(&format!("om_{n}"));
        }
        assert!(!posted.contains("om_0"));
        assert!(posted.contains("om_1"));
        assert!(posted.contains(&format!("om_{REMEMBERED}")));
    }
}
