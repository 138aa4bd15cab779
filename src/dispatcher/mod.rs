//! The pipeline (SPEC.md section 4): every inbound event, whatever its platform, goes through
//! the same steps in the same order. [`Dispatcher::process`] lists them; each step lives in its
//! own module and says whether the event goes on or stops, and why ([`Handled`]).
//!
//! ```text
//!  adapter ──accept──▶ 2 dedupe (durable) ──ack──▶ platform
//!                           │ spawn
//!                           ▼
//!  3 self ▶ 4 admin ▶ 5 policy ▶ answer ▶ 6 activation ▶ 7 bot guards ▶ 8 rate limit
//!                                │             │ not woken: history buffer
//!                                │             ▼
//!                                │   9 lanes ▶ 10 turn ▶ 11 outcome ▶ 12 deliver ▶ 13 mirror
//!                                ▼
//!            a human's answer to a bot's escalate_to_user question: routed back to that bot
//! ```

mod activation;
mod admin_step;
mod answer_step;
mod dedupe;
mod inbox;
mod policy;
mod self_drop;
mod speaker;
mod turn_step;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{EventSink, InboundEvent, InboundKind, NotTaken};

pub use activation::Wake;
pub use inbox::LeftOver;
pub use policy::Refusal;

use self::policy::PolicyDecision;
use self::speaker::Speaker;
use crate::config::Activation;
use crate::deliver::Target;
use crate::engine::Services;
use crate::guards::{BotMessage, BotRefusal, RateVerdict};
use crate::metrics;
use crate::mirror::now_ms;
use crate::roster::{Account, ChatPolicy};
use crate::session::{SessionKey, chat_key};
use crate::store::{HistoryEntry, InboxId, Pairing};

/// The largest inbound text the pipeline takes (SPEC.md section 9): anything longer is refused
/// with a message, never truncated.
pub const MAX_TEXT_BYTES: usize = 100 * 1024;

/// What became of one event. Returned to callers that wait (the local HTTP chat) and logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Already handled before (a platform redelivery or a replay).
    Duplicate,
    /// Stopped before any turn.
    Dropped(DropReason),
    /// Not addressed to the bot: kept in the chat's history buffer as context.
    Buffered,
    /// An admin command, answered without a model turn.
    Admin(String),
    /// A human's answer to a bot's question (this escalation id), routed back to the bot.
    Answered(String),
    /// The bot replied; the text as delivered (silent token stripped).
    Replied(String),
    /// The bot chose silence.
    Silent,
    /// The turn or its delivery failed; recorded in the transcript.
    Failed(String),
}

/// Why an event stopped before a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// No configured account matches the event.
    UnknownAccount,
    /// The bot's own message.
    OwnMessage,
    /// Another account already answered this admin command.
    AdminHandledElsewhere,
    /// The chat or DM policy refused the sender.
    Policy(Refusal),
    /// A DM sender waiting for pairing approval.
    PairingPending,
    /// The bot is paused in this chat.
    Paused,
    /// A bot-authored message that may not wake this bot.
    BotGuard(BotRefusal),
    /// A line the gateway posted through a bot account (admin answer, notice, error reply).
    GatewayNotice,
    /// The sender is over the inbound rate limit.
    RateLimited,
    /// The text is over [`MAX_TEXT_BYTES`].
    TooLong,
    /// The gateway is draining for shutdown and takes no new events.
    ShuttingDown,
    /// The store cannot record the event (disk full, read-only): refused rather than answered
    /// without a record.
    StoreFailing,
}

/// The pipeline. Cheap to clone; every adapter feeds the same one.
#[derive(Clone)]
pub struct Dispatcher {
    shared: Arc<Services>,
}

/// One event on its way through the steps, with what earlier steps learned.
pub(crate) struct Inbound<'a> {
    pub event: InboundEvent,
    pub account: &'a Account,
    pub speaker: Speaker,
    pub policy: ChatPolicy,
    /// `<platform>:<chat>[:thread:<id>]`: history buffer and bot chains.
    pub chat_key: String,
    /// `<platform>:<chat>`: durable chat settings.
    pub settings_key: String,
}

impl Inbound<'_> {
    /// The bot that received the event.
    pub(crate) fn bot(&self) -> &str {
        self.account.bot.id()
    }

    /// The session this event belongs to.
    pub(crate) fn session(&self) -> SessionKey {
        SessionKey {
            bot: self.bot().to_owned(),
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
}

impl Dispatcher {
    /// A dispatcher over `shared`.
    pub fn new(shared: Arc<Services>) -> Self {
        Self { shared }
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<Services> {
        &self.shared
    }

    /// Deduplicate and run the whole pipeline, waiting for the outcome. The local chat uses
    /// this; platform adapters go through [`EventSink::accept`], which does not wait.
    pub async fn handle(&self, event: InboundEvent) -> Handled {
        if self.shared.tasks().is_closed() {
            return Handled::Dropped(DropReason::ShuttingDown);
        }
        // Tracked like a spawned run, so a shutdown waits for it too.
        self.shared
            .tasks()
            .track_future(async {
                match self.intake(&event).await {
                    Ok(Some(filed)) => self.run_filed(filed, event).await,
                    Ok(None) => Handled::Duplicate,
                    Err(_) => Handled::Dropped(DropReason::StoreFailing),
                }
            })
            .await
    }

    /// Events accepted whose pipeline run has not finished.
    pub fn in_flight(&self) -> usize {
        self.shared.tasks().len()
    }

    /// Stop taking events and wait (at most `grace`) for the turns in flight to finish.
    /// Returns whether everything finished.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.shared.tasks().close();
        tokio::time::timeout(grace, self.shared.tasks().wait())
            .await
            .is_ok()
    }

    /// Step 2: claim the event and file it in the inbox, durably, before it is acknowledged.
    /// `None` is a duplicate. A store that cannot record it refuses it, loudly: answering
    /// without a transcript is worse than the platform's redelivery a little later.
    async fn intake(&self, event: &InboundEvent) -> Result<Option<InboxId>, NotTaken> {
        let platform = event.platform.as_str();
        match inbox::file(&self.shared.store(), event, now_ms()).await {
            Ok(Some(filed)) => {
                self.shared.metrics().add(&metrics::EVENTS_IN, platform);
                Ok(Some(filed))
            }
            Ok(None) => {
                self.shared.metrics().add(&metrics::DUPLICATES, platform);
                tracing::debug!(message = %event.message_id, "duplicate event ignored");
                Ok(None)
            }
            Err(err) => {
                self.shared
                    .metrics()
                    .add(&metrics::EVENTS_REFUSED, platform);
                tracing::error!(
                    %err, platform, account = %event.account, message = %event.message_id,
                    "event refused: the store cannot record it; readiness is false until the \
                     store takes writes again, and the platform will redeliver"
                );
                Err(NotTaken::StoreFailing)
            }
        }
    }

    /// Steps 3 to 13 for a filed event, then take it out of the inbox.
    async fn run_filed(&self, filed: InboxId, event: InboundEvent) -> Handled {
        let handled = self.process(event).await;
        if let Err(err) = self.shared.store().inbox_done(filed).await {
            tracing::error!(%err, "could not mark an event handled; a restart will run it again");
        }
        handled
    }

    /// Steps 3 to 13.
    pub(crate) async fn process(&self, event: InboundEvent) -> Handled {
        let shared = &*self.shared;
        let Some(account) = shared.roster().account(event.platform, &event.account) else {
            tracing::warn!(platform = %event.platform, account = %event.account, "event for an unknown account");
            return Handled::Dropped(DropReason::UnknownAccount);
        };
        let me = account.adapter.self_id();
        if self_drop::is_own_message(&event, me.as_ref()) {
            return Handled::Dropped(DropReason::OwnMessage);
        }
        let inbound = self.inbound(event, account);
        if self.is_gateway_notice(&inbound) {
            return Handled::Dropped(DropReason::GatewayNotice);
        }
        if inbound.event.text.len() > MAX_TEXT_BYTES {
            let text = "That message is over 100 kB, too long for me to read; please send less.";
            turn_step::notice(shared, &inbound, text).await;
            return Handled::Dropped(DropReason::TooLong);
        }
        if let Some(handled) = admin_step::intercept(&self.shared, &inbound).await {
            return handled;
        }
        if let Err(stop) = self.check_policy(&inbound).await {
            return stop;
        }
        if inbound.speaker.origin == crate::store::Origin::Human {
            shared.guards().bot_messages.human_spoke(&inbound.chat_key);
        }
        if let Some(answered) = answer_step::intercept(&self.shared, &inbound).await {
            return answered;
        }
        let settings = shared
            .store()
            .chat_settings(&inbound.settings_key)
            .await
            .unwrap_or_default();
        let activation = settings
            .activation
            .as_deref()
            .and_then(parse_activation)
            .unwrap_or(inbound.policy.activation);
        let roster = shared.roster();
        let woke = activation::decide(
            &inbound.event,
            me.as_ref(),
            activation,
            &inbound.policy,
            |u| roster.bot_of_user(inbound.event.platform, u).is_some(),
        );
        let Some(wake) = woke else {
            self.buffer(&inbound).await;
            return Handled::Buffered;
        };
        if settings.is_paused(inbound.bot()) {
            self.buffer(&inbound).await;
            return Handled::Dropped(DropReason::Paused);
        }
        if let Err(refusal) = self.check_bot_message(&inbound) {
            let reason = refusal.as_str();
            shared.metrics().add(&metrics::BOT_MESSAGE_REFUSALS, reason);
            let chat = Some(inbound.settings_key.clone());
            shared.metrics().refused("bot_messages", reason, chat);
            tracing::info!(
                bot = inbound.bot(),
                reason = refusal.as_str(),
                "bot message refused"
            );
            self.buffer(&inbound).await;
            return Handled::Dropped(DropReason::BotGuard(refusal));
        }
        if let Some(stop) = self.check_rate(&inbound).await {
            return stop;
        }
        turn_step::run(&self.shared, &inbound, wake).await
    }

    fn inbound<'a>(&self, event: InboundEvent, account: &'a Account) -> Inbound<'a> {
        let shared = &self.shared;
        let speaker = Speaker::of(&event, &shared.roster());
        let policy = shared
            .chat_rules()
            .resolve(event.platform, event.chat.as_str());
        Inbound {
            chat_key: chat_key(event.platform, &event.chat, event.thread.as_ref()),
            settings_key: chat_key(event.platform, &event.chat, None),
            event,
            account,
            speaker,
            policy,
        }
    }

    /// Step 3, continued: the gateway's own lines, posted through another bot's account.
    fn is_gateway_notice(&self, inbound: &Inbound<'_>) -> bool {
        let Some(author) = &inbound.speaker.bot else {
            return false;
        };
        // Lines remembered for the whole chat (a chain's, posted as replies that the platform
        // may put in a thread of its own) match in any of its threads.
        let notices = self.shared.own_notices();
        let text = &inbound.event.text;
        notices.is_notice(&inbound.chat_key, author, text)
            || notices.is_notice(&inbound.settings_key, author, text)
    }

    /// Step 5.
    async fn check_policy(&self, inbound: &Inbound<'_>) -> Result<(), Handled> {
        let shared = &*self.shared;
        let event = &inbound.event;
        let is_admin = admin_step::is_admin(&shared.config().admins, event);
        let decision = policy::decide(
            event,
            &inbound.policy,
            &shared.config().chats_default,
            is_admin,
        );
        match decision {
            PolicyDecision::Allow => Ok(()),
            PolicyDecision::Refuse(refusal) => {
                tracing::info!(sender = %event.sender.id, chat = %event.chat, reason = refusal.as_str(), "policy refused the sender");
                if event.chat_kind == baton_contract::ChatKind::Dm {
                    self.notify_once(inbound, refusal.notice()).await;
                }
                Err(Handled::Dropped(DropReason::Policy(refusal)))
            }
            PolicyDecision::NeedsPairing => {
                let pairing = shared
                    .store()
                    .pairing(
                        event.platform.as_str(),
                        inbound.account.id.as_str(),
                        event.sender.id.as_str(),
                        now_ms(),
                    )
                    .await;
                match pairing {
                    Ok(Pairing::Paired) => Ok(()),
                    Ok(Pairing::Pending { code, .. }) => {
                        let text = format!(
                            "Hi! I need an admin's approval before we can talk. Ask an admin to run \
                             `/baton pairing approve {code}` (or `baton pairing approve {code}`). \
                             The code is good for one hour."
                        );
                        self.notify_once(inbound, &text).await;
                        tracing::info!(sender = %event.sender.id, "DM sender waiting for pairing");
                        Err(Handled::Dropped(DropReason::PairingPending))
                    }
                    Ok(Pairing::Full) => {
                        tracing::warn!(
                            sender = %event.sender.id, account = %inbound.account.id,
                            "DM sender not given a pairing code: the account holds its three \
                             live codes; approve or let them expire"
                        );
                        Err(Handled::Dropped(DropReason::PairingPending))
                    }
                    Err(err) => {
                        tracing::error!(%err, "pairing store failed; refusing the DM");
                        Err(Handled::Dropped(DropReason::PairingPending))
                    }
                }
            }
        }
    }

    /// Step 7.
    fn check_bot_message(&self, inbound: &Inbound<'_>) -> Result<(), BotRefusal> {
        let speaker = &inbound.speaker;
        if speaker.origin != crate::store::Origin::Bot {
            return Ok(());
        }
        let author = speaker
            .bot
            .as_deref()
            .unwrap_or(inbound.event.sender.id.as_str());
        self.shared.guards().bot_messages.check(BotMessage {
            chat: &inbound.chat_key,
            message_id: inbound.event.message_id.as_str(),
            author,
            woken: inbound.bot(),
            author_allowed: inbound.policy.allow_bots.is_match(author),
        })
    }

    /// Step 8.
    async fn check_rate(&self, inbound: &Inbound<'_>) -> Option<Handled> {
        let verdict = self
            .shared
            .guards()
            .inbound
            .check(inbound.bot(), &inbound.speaker.label);
        if verdict != RateVerdict::Allowed {
            let chat = Some(inbound.settings_key.clone());
            self.shared
                .metrics()
                .refused("inbound_rate", "per-sender", chat);
        }
        match verdict {
            RateVerdict::Allowed => None,
            RateVerdict::LimitedNotify { retry_after } => {
                let text = format!(
                    "You're sending messages faster than I can answer; I'll read again in {} s.",
                    retry_after.as_secs().max(1)
                );
                turn_step::notice(&self.shared, inbound, &text).await;
                Some(Handled::Dropped(DropReason::RateLimited))
            }
            RateVerdict::LimitedQuiet => Some(Handled::Dropped(DropReason::RateLimited)),
        }
    }

    /// A policy notice, at most once per sender per account every 10 minutes.
    async fn notify_once(&self, inbound: &Inbound<'_>, text: &str) {
        let key = (
            inbound.account.id.to_string(),
            inbound.event.sender.id.to_string(),
        );
        if self.shared.notices().check(&key).is_ok() {
            turn_step::notice(&self.shared, inbound, text).await;
        }
    }

    /// Keep an un-activated message as context for the chat's bots.
    async fn buffer(&self, inbound: &Inbound<'_>) {
        let entry = HistoryEntry {
            message_id: inbound.event.message_id.to_string(),
            sender_id: inbound.event.sender.id.to_string(),
            speaker: inbound.speaker.name.clone(),
            text: inbound.event.text.clone(),
            ts_ms: inbound.event.timestamp_ms,
        };
        let limit = inbound.policy.history_limit;
        if limit == 0 {
            return;
        }
        if let Err(err) = self
            .shared
            .store()
            .history_push(&inbound.chat_key, entry, limit)
            .await
        {
            tracing::error!(%err, "could not keep the message in the history buffer");
        }
    }
}

fn parse_activation(s: &str) -> Option<Activation> {
    match s {
        "mention" => Some(Activation::Mention),
        "always" => Some(Activation::Always),
        _ => None,
    }
}

#[async_trait]
impl EventSink for Dispatcher {
    /// Claim and file the event durably, then run the rest of the pipeline in the background so
    /// the adapter can acknowledge the platform at once.
    async fn accept(&self, event: InboundEvent) -> Result<(), NotTaken> {
        if self.shared.tasks().is_closed() {
            return Err(NotTaken::ShuttingDown);
        }
        let Some(filed) = self.intake(&event).await? else {
            return Ok(());
        };
        let this = self.clone();
        self.shared.tasks().spawn(async move {
            let handled = this.run_filed(filed, event).await;
            tracing::debug!(?handled, "event handled");
        });
        Ok(())
    }
}
