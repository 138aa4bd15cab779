//! Pipeline step 3: a bot never reacts to its own messages.
//!
//! Adapters mark what they know (`is_self`), and the account's own platform identity is checked
//! too, so a message posted by this bot through another path (another process, the platform's
//! UI) is still recognised.

use baton_contract::{InboundEvent, UserId};

use super::Inbound;
use super::stop::{DropReason, Step, Stop};
use crate::engine::OwnNotices;

/// Whether `event` was written by the account that received it (`me`).
pub(crate) fn is_own_message(event: &InboundEvent, me: Option<&UserId>) -> bool {
    event.sender.is_self || me == Some(&event.sender.id)
}

/// Step 3: the bot's own message.
pub(super) fn not_own(inbound: &Inbound<'_>) -> Step<()> {
    let me = inbound.account.adapter.self_id();
    if is_own_message(&inbound.event, me.as_ref()) {
        return Err(Stop::dropped(DropReason::OwnMessage));
    }
    Ok(())
}

/// Step 3, continued: the gateway's own lines (`notices`), posted through another bot's
/// account.
pub(super) fn not_a_gateway_line(notices: &OwnNotices, inbound: &Inbound<'_>) -> Step<()> {
    let Some(author) = &inbound.speaker.bot else {
        return Ok(());
    };
    // Lines remembered for the whole chat (a chain's, posted as replies that the platform
    // may put in a thread of its own) match in any of its threads.
    let text = &inbound.event.text;
    if notices.is_notice(&inbound.chat_key, author, text)
        || notices.is_notice(&inbound.settings_key, author, text)
    {
        return Err(Stop::dropped(DropReason::GatewayNotice));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use baton_contract::{ChatKind, Platform, Sender};

    use super::*;

    fn from(id: &str, is_self: bool) -> InboundEvent {
        let sender = Sender {
            id: id.into(),
            name: String::new(),
            is_bot: true,
            is_self,
        };
        InboundEvent::text_message(
            Platform::Local,
            "snark".into(),
            "room".into(),
            ChatKind::Group,
            sender,
            "m".into(),
            "hi",
        )
    }

    #[test]
    fn own_messages_are_recognised_by_flag_or_identity() {
        let me = UserId::from("snark");
        assert!(is_own_message(&from("x", true), Some(&me)));
        assert!(is_own_message(&from("snark", false), Some(&me)));
        assert!(!is_own_message(&from("caid", false), Some(&me)));
        assert!(!is_own_message(&from("caid", false), None));
    }
}
