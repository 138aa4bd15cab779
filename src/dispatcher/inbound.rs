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

#[cfg(test)]
mod tests {
    use baton_contract::CommandReply;

    use super::super::testing::{inbound, to_bot};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// A thread keys the history buffer, the bot chains and the session, but not the chat's
    /// durable settings, which are the whole chat's.
    #[tokio::test]
    async fn a_thread_keys_the_history_and_session_but_not_the_chat_settings() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let mut event = to_bot("alpha", 1, "room", "ann", "hi");
        event.thread = Some("t1".into());
        let inbound = inbound(&gw.dispatcher, event);
        assert_eq!(inbound.chat_key.as_str(), "local:room:thread:t1");
        assert_eq!(inbound.settings_key.as_str(), "local:room");
        let session = inbound.session();
        assert_eq!(session.bot.as_str(), "alpha");
        assert_eq!(session.account.as_str(), "alpha");
        assert_eq!(session.chat.as_str(), "room");
        assert_eq!(session.thread.as_ref().map(|t| t.as_str()), Some("t1"));
    }

    /// An answer goes to the event's thread as a reply to it; a native command's answer goes
    /// privately to its caller, a message's never does.
    #[tokio::test]
    async fn an_answer_replies_in_the_thread_and_privately_only_to_a_native_command() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let mut event = to_bot("alpha", 1, "room", "ann", "hi");
        event.thread = Some("t1".into());
        let message = inbound(&gw.dispatcher, event.clone()).reply_target();
        assert_eq!(message.chat.as_str(), "room");
        assert_eq!(message.thread.as_ref().map(|t| t.as_str()), Some("t1"));
        assert_eq!(message.reply_to.as_ref().map(|m| m.as_str()), Some("m1"));
        assert_eq!(message.ephemeral, None);
        let reply = CommandReply {
            token: "tok".into(),
        };
        event.kind = InboundKind::Command {
            reply: reply.clone(),
        };
        let command = inbound(&gw.dispatcher, event).reply_target();
        assert_eq!(command.ephemeral, Some(("ann".into(), reply)));
    }

    /// The history buffer keeps who said it by the name people read and the id it came from;
    /// the event stream tells it by the speaker's label, in the thread's chat.
    #[tokio::test]
    async fn the_buffer_and_the_stream_tell_the_speaker_as_each_reads_it() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let mut event = to_bot("alpha", 1, "room", "ann", "the deploy is at five");
        event.sender.name = "Ann B".into();
        event.thread = Some("t1".into());
        event.timestamp_ms = 42;
        let human = inbound(&gw.dispatcher, event);
        let entry = human.history_entry();
        assert_eq!(
            (entry.speaker.as_str(), entry.sender_id.as_str()),
            ("Ann B", "ann")
        );
        assert_eq!((entry.message_id.as_str(), entry.ts_ms), ("m1", 42));
        assert_eq!(entry.text, "the deploy is at five");
        let Event::EventReceived {
            chat,
            sender,
            outcome,
            reason,
            ..
        } = human.received(Received::Dropped, Some("paused".into()))
        else {
            panic!("not an event received");
        };
        assert_eq!(chat.as_str(), "local:room:thread:t1");
        assert_eq!(sender, "ann");
        assert_eq!(
            (outcome, reason.as_deref()),
            (Received::Dropped, Some("paused"))
        );
        let bot = inbound(&gw.dispatcher, to_bot("alpha", 2, "room", "beta", "hi"));
        assert_eq!(bot.history_entry().speaker, "bot:beta");
    }
}
