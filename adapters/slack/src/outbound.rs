//! Posting one chunk: into the triggering message's thread, or privately for a slash command;
//! and a file, into the same thread.
//!
//! The gateway has already split the reply to 4000 characters and retries a 429 itself; this
//! module makes exactly one request per call, so a failure whose fate is unknown is never
//! repeated here (Slack has no idempotency key).

use baton_contract::{
    DeleteMessage, EditMessage, MessageId, OutboundFile, OutboundMessage, SendError, SentMessage,
};

use crate::api::Api;
use crate::normalize::{message_id, ts_of};

/// Post `message` once.
pub(crate) async fn send(api: &Api, message: &OutboundMessage) -> Result<SentMessage, SendError> {
    if let Some((_user, reply)) = &message.ephemeral {
        api.respond(&reply.token, &message.text).await?;
        return Ok(SentMessage {
            message_id: MessageId(String::new()),
        });
    }
    let channel = message.chat.as_str();
    // Reply in the thread the message came from; a top-level message starts a thread under
    // itself, so the answer never lands in the channel as well.
    let thread_ts = message
        .thread
        .as_ref()
        .map(|t| t.as_str())
        .or_else(|| message.reply_to.as_ref().and_then(ts_of));
    let ts = api.post_message(channel, thread_ts, &message.text).await?;
    Ok(SentMessage {
        message_id: message_id(channel, &ts),
    })
}

/// Slack's limit for one uploaded file (1 GB); baton's own `[artifacts] max_bytes` is lower.
pub(crate) const MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;

/// Post `file` once, into the thread the text goes to. Its id is `file:<Slack file id>`.
pub(crate) async fn upload(api: &Api, file: &OutboundFile) -> Result<SentMessage, SendError> {
    let thread_ts = file
        .thread
        .as_ref()
        .map(|t| t.as_str())
        .or_else(|| file.reply_to.as_ref().and_then(ts_of));
    let id = api
        .upload_file(
            file.chat.as_str(),
            thread_ts,
            &file.name,
            &file.media_type,
            &file.content,
        )
        .await?;
    Ok(SentMessage {
        message_id: MessageId(format!("file:{id}")),
    })
}

/// Replace the text of a message this app posted (`chat.update`), once.
pub(crate) async fn edit(api: &Api, edit: &EditMessage) -> Result<(), SendError> {
    let ts = message_ts(&edit.message_id)?;
    api.update_message(edit.chat.as_str(), ts, &edit.text).await
}

/// Delete a message this bot posted (`chat.delete`).
pub(crate) async fn delete(api: &Api, message: &DeleteMessage) -> Result<(), SendError> {
    let ts = message_ts(&message.message_id)?;
    api.delete_message(message.chat.as_str(), ts).await
}

/// The `ts` of a message the gateway knows by its id.
pub(crate) fn message_ts(id: &MessageId) -> Result<&str, SendError> {
    ts_of(id).ok_or_else(|| SendError::Rejected {
        code: "bad_message_id".into(),
        message: format!("`{id}` is not a Slack message id"),
    })
}
