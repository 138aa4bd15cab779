//! [`Inbound`]: one event on its way through the steps, with what the pipeline learned about it
//! once (its account, speaker, chat rules and keys), so no step works it out again.

use baton_contract::{ChatKey, InboundEvent, InboundKind};

use super::Dispatcher;
use super::speaker::Speaker;
use crate::bot_id::BotId;
use crate::events::{Event, Received};
use crate::pen::Arrival;
use crate::post::Target;
use crate::roster::{Account, ChatPolicy};
use crate::session::SessionKey;
use crate::store::{HistoryEntry, InboxId, WriteEpoch};

/// One event on its way through the steps, with what earlier steps learned.
pub(crate) struct Inbound<'a> {
    pub event: InboundEvent,
    pub account: &'a Account,
    pub speaker: Speaker,
    pub policy: ChatPolicy,
    /// `<platform>:<chat>[:thread:<id>]`: history buffer and bot chains.
    pub chat_key: ChatKey,
    /// `<platform>:<chat>`: durable chat settings.
    pub settings_key: ChatKey,
    /// First run, or a replay after a stop.
    pub arrival: Arrival,
    /// Its inbox row, taken out when the run ends (by the run's last write where it has one).
    pub filed: Option<InboxId>,
    /// The store's write troubles as the run began: moved by its end, a record of the run may
    /// have been refused, and the event is run again rather than taken out.
    pub began: WriteEpoch,
}

impl Inbound<'_> {
    /// The bot that received the event.
    pub(crate) fn bot(&self) -> &BotId {
        self.account.bot.id()
    }

    /// The session this event belongs to.
    pub(crate) fn session(&self) -> SessionKey {
        SessionKey {
            bot: self.bot().clone(),
            platform: self.event.platform,
            account: self.account.id.clone(),
            chat: self.event.chat.clone(),
            thread: self.event.thread.clone(),
        }
    }

    /// Where an answer to this event goes: its thread, as a reply, privately for native commands.
    pub(crate) fn reply_target(&self) -> Target {
        Target {
            chat: self.event.chat.clone(),
            thread: self.event.thread.clone(),
            reply_to: Some(self.event.message_id.clone()),
            ephemeral: match &self.event.kind {
                InboundKind::Command { reply } => {
                    Some((self.event.sender.id.clone(), reply.clone()))
                }
                InboundKind::Message => None,
            },
        }
    }

    /// What became of this event, for the event stream: it woke the bot (the turn step says so
    /// as it starts), or it stopped with `outcome`, for `reason`.
    pub(crate) fn received(&self, outcome: Received, reason: Option<String>) -> Event {
        let event = &self.event;
        Event::EventReceived {
            platform: event.platform,
            account: self.account.id.clone(),
            bot: self.bot().clone(),
            chat: self.chat_key.clone(),
            message_id: event.message_id.clone(),
            sender: self.speaker.label.clone(),
            outcome,
            reason,
        }
    }

    /// The message as its chat's history buffer keeps it.
    pub(crate) fn history_entry(&self) -> HistoryEntry {
        HistoryEntry {
            message_id: self.event.message_id.as_str().to_owned(),
            sender_id: self.event.sender.id.as_str().to_owned(),
            speaker: self.speaker.name.clone(),
            text: self.event.text.clone(),
            ts_ms: self.event.timestamp_ms,
        }
    }
}

impl Dispatcher {
    /// `event`, received by `account`, with what every step needs to know about it.
    pub(super) fn inbound<'a>(
        &self,
        event: InboundEvent,
        account: &'a Account,
        arrival: Arrival,
        filed: Option<InboxId>,
    ) -> Inbound<'a> {
        let engine = &self.engine;
        let speaker = Speaker::of(&event, engine.roster());
        let policy = engine
            .chat_rules()
            .resolve(event.platform, event.chat.as_str());
        Inbound {
            chat_key: ChatKey::new(event.platform, &event.chat, event.thread.as_ref()),
            settings_key: ChatKey::new(event.platform, &event.chat, None),
            event,
            account,
            speaker,
            policy,
            arrival,
            filed,
            began: engine.store().write_epoch(),
        }
    }
}
