//! Who said a message, as the transcript and the model see it.
//!
//! The transcript attributes every line: a human by their platform id, a baton bot's own reply by
//! its bot id, and a message another bot wrote in the chat as `bot:<id>` (bot-origin), so nothing
//! a bot said is ever mistaken for a human's words.

use crate::bot_id::BotId;
use baton_contract::InboundEvent;

use crate::display_name::sanitize;
use crate::roster::Roster;
use crate::store::Origin;

/// The author of an inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Speaker {
    /// Transcript attribution: the human's id, or `bot:<id>`.
    pub label: String,
    /// A readable name for the model.
    pub name: String,
    /// Human or bot.
    pub origin: Origin,
    /// The baton bot that wrote it, when it was one of ours.
    pub bot: Option<BotId>,
}

impl Speaker {
    /// Attribute `event`'s author, resolving baton bots by their platform identity.
    pub(crate) fn of(event: &InboundEvent, roster: &Roster) -> Speaker {
        let sender = &event.sender;
        let bot = roster
            .bot_of_user(event.platform, &sender.id)
            .map(|b| b.id().clone());
        if !sender.is_bot && bot.is_none() {
            // Display names are the sender's to choose: cleaned before anyone reads them.
            let name = if sender.name.is_empty() {
                sanitize(sender.id.as_str()).into_owned()
            } else {
                sanitize(&sender.name).into_owned()
            };
            return Speaker {
                label: sanitize(sender.id.as_str()).into_owned(),
                name,
                origin: Origin::Human,
                bot: None,
            };
        }
        let id = bot.as_ref().map_or_else(
            || sanitize(sender.id.as_str()).into_owned(),
            BotId::to_string,
        );
        Speaker {
            label: format!("bot:{id}"),
            name: format!("bot:{id}"),
            origin: Origin::Bot,
            bot,
        }
    }
}
