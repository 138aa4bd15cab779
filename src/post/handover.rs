//! Sibling posts: bots see each other on every platform.
//!
//! Feishu/Lark never deliver one bot's posts to another (except an @mention, with the
//! `im:message.group_at_msg.include_bot:readonly` scope), so there an `always` bot, `allow_bots`,
//! the history buffer and the loop guards would never see the other bots in the chat. Baton
//! posts every word its bots say, so it hands each delivered post over itself: to every other
//! baton bot on that platform whose account is in the chat, as a bot-authored message that
//! takes the whole pipeline (dedupe, `allow_bots`, pair budgets, `max_bot_reply_chain`,
//! activation, history buffer). Whether a platform needs this is its adapter's capability
//! ([`Capabilities::bot_posts_reach_bots`]), so a platform with the same limit gets it for free.
//!
//! - **Durable.** Each hand-over is filed in the receiving account's inbox in the same store job
//!   that records the post ([`Store::append_handing_over`]): a kill -9 cannot separate them. Both
//!   are recorded (and a start that finds the hand-over unfinished runs it), or neither is, and
//!   the turn's replay finds the post begun and never confirmed, and records it as a failure.
//! - **One event.** A hand-over is claimed under the message id the platform gave the post, the
//!   id the platform's own copy carries too, so whichever comes first, the other is a duplicate.
//! - **Never to itself.** The poster's own account is not among the receivers.
//!
//! [`Capabilities::bot_posts_reach_bots`]: baton_contract::Capabilities::bot_posts_reach_bots
//! [`Store::append_handing_over`]: crate::store::Store::append_handing_over

use std::sync::Arc;

use baton_contract::{
    Adapter, ChatId, ChatKind, InboundEvent, MessageId, OutboundMessage, Platform, Sender,
};
use serde_json::json;

use crate::bot_id::BotId;
use crate::store::{Filing, InboxId};
use crate::timing::now_ms;

/// Runs a filed hand-over through the pipeline (`None`: a duplicate, the account had the message
/// already). The pipeline stands above delivery, so the gateway wires this in.
pub type RunHandedOver = Arc<dyn Fn(Option<InboxId>, InboundEvent) + Send + Sync>;

/// Who must be handed the posts of one account, and how.
#[derive(Clone)]
pub struct Handover {
    platform: Platform,
    /// The poster as the receivers see it, and the bot it is (`None`: nobody is handed
    /// anything).
    poster: Option<(Sender, BotId)>,
    receivers: Vec<Arc<dyn Adapter>>,
    run: Option<RunHandedOver>,
}

impl Handover {
    /// Nobody: the platform delivers bot posts itself (or there is nobody to tell).
    pub fn none() -> Self {
        Self {
            platform: Platform::Local,
            poster: None,
            receivers: Vec::new(),
            run: None,
        }
    }

    /// The posts of `poster` (the account of bot `bot`), handed to the other `accounts` of its
    /// platform; nobody where the platform delivers bot posts to bots itself.
    pub fn of<'a>(
        poster: &dyn Adapter,
        bot: &BotId,
        accounts: impl IntoIterator<Item = &'a Arc<dyn Adapter>>,
        run: RunHandedOver,
    ) -> Self {
        if poster.capabilities().bot_posts_reach_bots {
            return Self::none();
        }
        let Some(me) = poster.self_id() else {
            // Not connected yet: it cannot have posted anything.
            return Self::none();
        };
        let platform = poster.platform();
        let receivers: Vec<_> = accounts
            .into_iter()
            .filter(|a| a.platform() == platform && a.account() != poster.account())
            .cloned()
            .collect();
        Self {
            platform,
            poster: Some((
                Sender {
                    id: me,
                    name: bot.to_string(),
                    is_bot: true,
                    is_self: false,
                },
                bot.clone(),
            )),
            receivers,
            run: Some(run),
        }
    }

    /// The receivers that are in `chat` (each account answers for itself). One that cannot
    /// tell is left out, with a warning: a bot must not hear a chat it is not in.
    pub(super) async fn members(&self, chat: &ChatId) -> Vec<Arc<dyn Adapter>> {
        let mut members = Vec::with_capacity(self.receivers.len());
        for receiver in &self.receivers {
            match receiver.in_chat(chat).await {
                Ok(true) => members.push(Arc::clone(receiver)),
                Ok(false) => {}
                Err(err) => tracing::warn!(
                    %err, account = %receiver.account(), %chat,
                    "cannot tell whether the account is in the chat; it is not handed the \
                     other bots' posts there (check its app's chat permissions)"
                ),
            }
        }
        members
    }

    /// The post `message`, delivered as `id`, as each of `members` receives it.
    pub(super) fn events(
        &self,
        members: &[Arc<dyn Adapter>],
        message: &OutboundMessage,
        id: &MessageId,
    ) -> Vec<InboundEvent> {
        let Some((poster, poster_bot)) = &self.poster else {
            return Vec::new();
        };
        members
            .iter()
            .map(|receiver| {
                let read = receiver.read_sibling_post(message);
                let mut event = InboundEvent::text_message(
                    self.platform,
                    receiver.account().clone(),
                    message.chat.clone(),
                    // Two bots in one chat: a group (direct chats have no other member bot).
                    ChatKind::Group,
                    poster.clone(),
                    id.clone(),
                    read.text,
                );
                event.thread = message.thread.clone();
                event.reply_to = message.reply_to.clone();
                event.reply_to_author = read.reply_to_author;
                event.mentions = read.mentions;
                event.mentions_everyone = read.mentions_everyone;
                event.timestamp_ms = now_ms();
                event.raw = json!({ "handed_over_by": poster_bot });
                event
            })
            .collect()
    }

    /// Each event with its filing in its account's inbox.
    pub(super) fn filings(events: Vec<InboundEvent>) -> (Vec<InboundEvent>, Vec<Filing>) {
        events
            .into_iter()
            .map(|event| {
                let filing = Filing::of(&event);
                (event, filing)
            })
            .unzip()
    }

    /// Run the hand-overs filed as `filed` (`None`: the account had the message already).
    pub(super) fn run(&self, events: Vec<InboundEvent>, filed: Vec<Option<InboxId>>) {
        let Some(run) = &self.run else {
            return;
        };
        for (event, id) in events.into_iter().zip(filed) {
            run(id, event);
        }
    }

    /// Whether nobody is handed anything.
    pub(super) fn is_empty(&self) -> bool {
        self.receivers.is_empty()
    }
}
