//! How Telegram's ids become the contract's: a message id is only unique inside its chat, so
//! baton names a message `<chat id>:<message id>` (dedupe goes by chat and message id, and a
//! reply knows where to quote); chats, users and forum topics keep Telegram's numbers.

use baton_contract::{ChatId, MessageId};

/// The contract's id of message `message` in chat `chat`.
pub(crate) fn message_id(chat: i64, message: i64) -> MessageId {
    MessageId(format!("{chat}:{message}"))
}

/// A message id baton made with [`message_id`], back into Telegram's numbers.
pub(crate) fn split_message_id(id: &MessageId) -> Option<(i64, i64)> {
    let (chat, message) = id.as_str().rsplit_once(':')?;
    Some((chat.parse().ok()?, message.parse().ok()?))
}

/// A chat id as Telegram takes it (a number; `-100…` for supergroups).
pub(crate) fn chat_number(chat: &ChatId) -> Option<i64> {
    chat.as_str().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_name_their_chat() {
        let id = message_id(-1001234567890, 42);
        assert_eq!(id.as_str(), "-1001234567890:42");
        assert_eq!(split_message_id(&id), Some((-1001234567890, 42)));
        assert_eq!(split_message_id(&MessageId("42".into())), None);
    }
}
