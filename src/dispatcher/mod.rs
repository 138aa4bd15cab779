//! The pipeline: every inbound event, whatever its platform, goes through
//! the same steps in the same order. `Dispatcher::pipeline` lists them; each returns a
//! `Step`: what the next steps need, or a `Stop` saying what became of
//! the event, whether the sender is owed a line and whether the message is kept as history.
//! One function (`Dispatcher::stopped`) performs those side effects.
//!
//! ```text
//!  adapter ──accept──▶ 2 dedupe (durable) ──ack──▶ platform
//!                           │ spawn
//!                           ▼
//!  account ▶ 3 own message ▶ 3 gateway line ▶ size ▶ 4 admin ▶ 5 policy ▶ 5½ answer
//!      ▶ 6 activation (not woken, paused: kept as history) ▶ 7 bot guards ▶ 8 rate limit
//!      ▶ 9 to 13: the session turn (engine: lane, files fetched, turn, outcome), delivered,
//!        mirrored
//! ```
//!
//! The pipeline stands on top of the flows it calls (admin, escalation); the turn itself is the
//! engine's ([`crate::engine`]), shared with every other flow that takes turns.

mod activation;
mod admin_step;
mod answer_step;
mod busy;
mod dedupe;
mod files_in;
mod inbox;
mod policy;
mod self_drop;
mod speaker;
mod stop;
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
use self::stop::{Notice, Step, Stop};
use crate::bot_id::BotId;
use crate::deliver::{RunHandedOver, Target};
use crate::engine::Services;
use crate::guards::{BotMessage, BotRefusal, RateVerdict};
use crate::lanes::QueueFull;
use crate::metrics;
use crate::mirror::{Arrival, now_ms};
use crate::roster::{Account, ChatPolicy};
use crate::session::SessionKey;
use crate::store::{InboxId, Pairing};
use baton_contract::ChatKey;

/// The largest inbound text the pipeline takes: anything longer is refused
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
    /// The bot's lane or session has its maximum of turns waiting.
    Busy(QueueFull),
    /// The text is over [`MAX_TEXT_BYTES`].
    TooLong,
    /// The gateway is draining for shutdown and takes no new events.
    ShuttingDown,
    /// The store cannot record the event (disk full, read-only): refused rather than answered
    /// without a record.
    StoreFailing,
}

impl DropReason {
    /// The reason's name, as `/api/events` tells it.
    pub fn as_str(&self) -> String {
        match self {
            DropReason::UnknownAccount => "unknown_account".into(),
            DropReason::OwnMessage => "own_message".into(),
            DropReason::AdminHandledElsewhere => "admin_handled_elsewhere".into(),
            DropReason::Policy(refusal) => format!("policy:{}", refusal.as_str()),
            DropReason::PairingPending => "pairing_pending".into(),
            DropReason::Paused => "paused".into(),
            DropReason::BotGuard(refusal) => format!("bot_guard:{}", refusal.as_str()),
            DropReason::GatewayNotice => "gateway_notice".into(),
            DropReason::RateLimited => "rate_limited".into(),
            DropReason::Busy(full) => format!("busy:{}", full.as_str()),
            DropReason::TooLong => "too_long".into(),
            DropReason::ShuttingDown => "shutting_down".into(),
            DropReason::StoreFailing => "store_failing".into(),
        }
    }
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
    pub chat_key: ChatKey,
    /// `<platform>:<chat>`: durable chat settings.
    pub settings_key: ChatKey,
    /// First run, or a replay after a stop.
    pub arrival: Arrival,
    /// Its inbox row, taken out when the run ends (by the run's last write where it has one).
    pub filed: Option<InboxId>,
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
                    Ok(Some(filed)) => self.run_filed(filed, event, Arrival::Fresh).await,
                    Ok(None) => Handled::Duplicate,
                    Err(_) => Handled::Dropped(DropReason::StoreFailing),
                }
            })
            .await
    }

    /// How a sibling post handed over by delivery (`src/deliver/handover.rs`) is run: counted
    /// and run in the background, like an accepted event. It is already filed in its account's
    /// inbox; one that arrives while the gateway drains stays there, and the next start runs it.
    pub fn handover_runner(&self) -> RunHandedOver {
        let services = Arc::downgrade(&self.shared);
        Arc::new(move |filed, event| {
            let Some(shared) = services.upgrade() else {
                return;
            };
            let platform = event.platform.as_str();
            let Some(filed) = filed else {
                shared.metrics().add(&metrics::DUPLICATES, platform);
                return;
            };
            shared.metrics().add(&metrics::EVENTS_IN, platform);
            if shared.tasks().is_closed() {
                return;
            }
            let this = Dispatcher::new(Arc::clone(&shared));
            shared.tasks().spawn(async move {
                let handled = this.run_filed(filed, event, Arrival::Fresh).await;
                tracing::debug!(?handled, "sibling post handled");
            });
        })
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
        match inbox::file(self.shared.store(), event, now_ms()).await {
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

    /// Steps 3 to 13 for a filed event, which end by taking it out of the inbox.
    async fn run_filed(&self, filed: InboxId, event: InboundEvent, arrival: Arrival) -> Handled {
        self.process(event, arrival, Some(filed)).await
    }

    /// Steps 3 to 13: the event's account, then [`Dispatcher::pipeline`]; a step that stops the
    /// event has its side effects performed in one place ([`Dispatcher::stopped`]). The run
    /// ends by taking `filed` out of the inbox: in the stop's own write when it keeps the
    /// message as history (one write instead of two for chatter), otherwise on its own.
    pub(crate) async fn process(
        &self,
        event: InboundEvent,
        arrival: Arrival,
        filed: Option<InboxId>,
    ) -> Handled {
        let shared = &*self.shared;
        let Some(account) = shared.roster().account(event.platform, &event.account) else {
            tracing::warn!(platform = %event.platform, account = %event.account, "event for an unknown account");
            self.finish(filed).await;
            return Handled::Dropped(DropReason::UnknownAccount);
        };
        let inbound = self.inbound(event, account, arrival, filed);
        match self.pipeline(&inbound).await {
            Ok(handled) => {
                self.finish(filed).await;
                handled
            }
            Err(stop) => self.stopped(&inbound, stop).await,
        }
    }

    /// The steps, in order. Each returns a [`Step`]: the value the next steps need, or the
    /// [`Stop`] that ends the event here.
    async fn pipeline(&self, inbound: &Inbound<'_>) -> Step<Handled> {
        self.not_own(inbound)?; // 3
        self.not_a_gateway_line(inbound)?; // 3
        self.within_size(inbound)?; // refused, never truncated
        self.admin(inbound).await?; // 4
        self.policy(inbound).await?; // 5
        self.human_spoke(inbound);
        self.answer(inbound).await?; // 5½
        let wake = self.activation(inbound).await?; // 6
        self.bot_message(inbound)?; // 7
        rate_limit(&self.shared, inbound)?; // 8
        self.received(inbound, crate::events::Received::Wake, None);
        Ok(turn_step::run(&self.shared, inbound, wake).await) // 9 to 13
    }

    fn inbound<'a>(
        &self,
        event: InboundEvent,
        account: &'a Account,
        arrival: Arrival,
        filed: Option<InboxId>,
    ) -> Inbound<'a> {
        let shared = &self.shared;
        let speaker = Speaker::of(&event, shared.roster());
        let policy = shared
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
        }
    }

    /// Step 3: the bot's own message.
    fn not_own(&self, inbound: &Inbound<'_>) -> Step<()> {
        let me = inbound.account.adapter.self_id();
        if self_drop::is_own_message(&inbound.event, me.as_ref()) {
            return Err(Stop::dropped(DropReason::OwnMessage));
        }
        Ok(())
    }

    /// Step 3, continued: the gateway's own lines, posted through another bot's account.
    fn not_a_gateway_line(&self, inbound: &Inbound<'_>) -> Step<()> {
        let Some(author) = &inbound.speaker.bot else {
            return Ok(());
        };
        // Lines remembered for the whole chat (a chain's, posted as replies that the platform
        // may put in a thread of its own) match in any of its threads.
        let notices = self.shared.own_notices();
        let text = &inbound.event.text;
        if notices.is_notice(&inbound.chat_key, author, text)
            || notices.is_notice(&inbound.settings_key, author, text)
        {
            return Err(Stop::dropped(DropReason::GatewayNotice));
        }
        Ok(())
    }

    /// Over [`MAX_TEXT_BYTES`]: refused with a notice.
    fn within_size(&self, inbound: &Inbound<'_>) -> Step<()> {
        if inbound.event.text.len() > MAX_TEXT_BYTES {
            let text = "That message is over 100 kB, too long for me to read; please send less.";
            return Err(Stop::dropped(DropReason::TooLong).with_notice(Notice::Now(text.into())));
        }
        Ok(())
    }

    /// Step 4: an admin command is answered (by the admin step) and goes no further.
    async fn admin(&self, inbound: &Inbound<'_>) -> Step<()> {
        admin_step::intercept(&self.shared, inbound).await
    }

    /// Step 5.
    async fn policy(&self, inbound: &Inbound<'_>) -> Step<()> {
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
                let stop = Stop::dropped(DropReason::Policy(refusal));
                if event.chat_kind == baton_contract::ChatKind::Dm {
                    let notice = Notice::OncePerSender(refusal.notice().to_owned());
                    return Err(stop.with_notice(notice));
                }
                Err(stop)
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
                let pending = Stop::dropped(DropReason::PairingPending);
                match pairing {
                    Ok(Pairing::Paired) => Ok(()),
                    Ok(Pairing::Pending { code, .. }) => {
                        let text = format!(
                            "Hi! I need an admin's approval before we can talk. Ask an admin to run \
                             `/baton pairing approve {code}` (or `baton pairing approve {code}`). \
                             The code is good for one hour."
                        );
                        tracing::info!(sender = %event.sender.id, "DM sender waiting for pairing");
                        Err(pending.with_notice(Notice::OncePerSender(text)))
                    }
                    Ok(Pairing::Full) => {
                        tracing::warn!(
                            sender = %event.sender.id, account = %inbound.account.id,
                            "DM sender not given a pairing code: the account holds its three \
                             live codes; approve or let them expire"
                        );
                        Err(pending)
                    }
                    Err(err) => {
                        tracing::error!(%err, "pairing store failed; refusing the DM");
                        Err(pending)
                    }
                }
            }
        }
    }

    /// A human who passed the policy speaks: the chat's bot-to-bot chain starts over.
    fn human_spoke(&self, inbound: &Inbound<'_>) {
        if inbound.speaker.origin == crate::store::Origin::Human {
            self.shared
                .guards()
                .bot_messages
                .human_spoke(&inbound.chat_key);
        }
    }

    /// Step 5½: a human's answer to a bot's question goes back to that bot, and no further.
    async fn answer(&self, inbound: &Inbound<'_>) -> Step<()> {
        match answer_step::intercept(&self.shared, inbound).await {
            Some(answered) => Err(Stop::handled(answered)),
            None => Ok(()),
        }
    }

    /// Step 6: whether the message wakes the bot (the chat's `/baton activation` over its
    /// configured one), and whether the bot is paused here. A message that does not wake it is
    /// kept as history.
    async fn activation(&self, inbound: &Inbound<'_>) -> Step<Wake> {
        let shared = &*self.shared;
        let settings = shared
            .store()
            .chat_settings(&inbound.settings_key)
            .await
            .unwrap_or_default();
        let activation = settings.activation.unwrap_or(inbound.policy.activation);
        let roster = shared.roster();
        let me = inbound.account.adapter.self_id();
        let woke = activation::decide(
            &inbound.event,
            me.as_ref(),
            activation,
            &inbound.policy,
            |u| roster.bot_of_user(inbound.event.platform, u).is_some(),
        );
        let Some(wake) = woke else {
            return Err(Stop::handled(Handled::Buffered).keep_as_history());
        };
        if settings.is_paused(inbound.bot()) {
            return Err(Stop::dropped(DropReason::Paused).keep_as_history());
        }
        Ok(wake)
    }

    /// Step 7.
    fn bot_message(&self, inbound: &Inbound<'_>) -> Step<()> {
        let speaker = &inbound.speaker;
        if speaker.origin != crate::store::Origin::Bot {
            return Ok(());
        }
        let author = speaker
            .bot
            .as_ref()
            .map_or(inbound.event.sender.id.as_str(), BotId::as_str);
        let checked = self.shared.guards().bot_messages.check(BotMessage {
            chat: &inbound.chat_key,
            message_id: inbound.event.message_id.as_str(),
            author,
            woken: inbound.bot().as_str(),
            author_allowed: inbound.policy.allow_bots.is_match(author),
        });
        checked.map_err(|refusal| Stop::dropped(DropReason::BotGuard(refusal)).keep_as_history())
    }
}

/// Step 8: the sender's budget with this bot. Over it, one notice, then silence for the window.
/// A non-admin's `/baton` command passes it too (`admin_step.rs`).
fn rate_limit(shared: &Services, inbound: &Inbound<'_>) -> Step<()> {
    let verdict = shared
        .guards()
        .inbound
        .check(inbound.bot().as_str(), &inbound.speaker.label);
    let limited = Stop::dropped(DropReason::RateLimited);
    match verdict {
        RateVerdict::Allowed => Ok(()),
        RateVerdict::LimitedNotify { retry_after } => {
            let text = format!(
                "You're sending messages faster than I can answer; I'll read again in {} s.",
                retry_after.as_secs().max(1)
            );
            Err(limited.with_notice(Notice::Now(text)))
        }
        RateVerdict::LimitedQuiet => Err(limited),
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
            let handled = this.run_filed(filed, event, Arrival::Fresh).await;
            tracing::debug!(?handled, "event handled");
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use baton_contract::{AccountId, ChatId, ChatKind, MessageId, Platform, Sender, UserId};

    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// Two echo bots; the local chat `room` is the only group allowed; `root` is an admin; a
    /// sender gets one message a minute; no bot's messages may wake a bot.
    fn config() -> String {
        echo_config(
            &["alpha", "beta"],
            "\n[[chats]]\nplatform = \"local\"\nid = \"room\"\n\n[admins]\nlocal = [\"root\"]\n\n\
             [limits]\ninbound_per_sender_per_minute = 1\n",
        )
        .replace("group_policy = \"open\"", "group_policy = \"allowlist\"")
    }

    /// A message to `alpha`'s account in `chat`, by `from` (a bot when it is one of ours).
    fn to_alpha(n: u32, chat: &str, from: &str, text: &str) -> InboundEvent {
        let is_bot = ["alpha", "beta"].contains(&from);
        let sender = Sender {
            id: UserId::from(from),
            name: from.to_owned(),
            is_bot,
            is_self: false,
        };
        let mut event = InboundEvent::text_message(
            Platform::Local,
            AccountId::from("alpha"),
            ChatId::from(chat),
            ChatKind::Group,
            sender,
            MessageId::from(format!("m{n}")),
            text,
        );
        event.mentions = vec![UserId::from("alpha")];
        event
    }

    /// Each event below would trip its step and every later one; it must stop at its own step.
    /// Moving a step later (or earlier) in [`Dispatcher::pipeline`] makes one of them stop
    /// elsewhere.
    #[tokio::test]
    async fn the_steps_run_in_order_and_the_first_stop_wins() {
        let gw = parts(&config()).await;
        let d = &gw.dispatcher;
        let huge = format!("/baton help {}", "x".repeat(MAX_TEXT_BYTES));
        // A sender over the rate limit, to show that every earlier step runs before it.
        for sender in ["ann", "beta"] {
            gw.services.guards().inbound.check("alpha", sender);
            let label = if sender == "beta" { "bot:beta" } else { sender };
            gw.services.guards().inbound.check("alpha", label);
        }

        let own = to_alpha(1, "elsewhere", "alpha", &huge);
        assert_eq!(
            d.process(own, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::OwnMessage)
        );

        gw.services.own_notices().remember(
            &ChatKey::new(baton_contract::Platform::Local, &"room".into(), None),
            &"beta".parse().unwrap(),
            &huge,
        );
        let notice = to_alpha(2, "room", "beta", &huge);
        assert_eq!(
            d.process(notice, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::GatewayNotice)
        );

        let long = to_alpha(3, "elsewhere", "ann", &huge);
        assert_eq!(
            d.process(long, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::TooLong)
        );

        let command = to_alpha(4, "elsewhere", "cid", "/baton help");
        let Handled::Admin(answer) = d.process(command, Arrival::Fresh, None).await else {
            panic!("an admin command is answered before the policy");
        };
        assert!(answer.contains("Only baton admins"), "{answer}");

        let refused = to_alpha(5, "elsewhere", "ann", "@alpha hi");
        assert!(matches!(
            d.process(refused, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::Policy(_))
        ));

        let mut unaddressed = to_alpha(6, "room", "beta", "chatter");
        unaddressed.mentions.clear();
        assert_eq!(
            d.process(unaddressed, Arrival::Fresh, None).await,
            Handled::Buffered
        );

        let from_bot = to_alpha(7, "room", "beta", "@alpha hi");
        assert!(matches!(
            d.process(from_bot, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::BotGuard(_))
        ));

        let limited = to_alpha(8, "room", "ann", "@alpha hi");
        assert_eq!(
            d.process(limited, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::RateLimited)
        );

        let fine = to_alpha(9, "room", "bob", "@alpha hi");
        assert_eq!(
            d.process(fine, Arrival::Fresh, None).await,
            Handled::Replied("hi".into())
        );
    }

    /// Chatter costs two writes: its filing (with the dedupe claim), and the history push that
    /// also takes it out of the inbox when its run ends. A mention's run still ends on its own.
    #[tokio::test]
    async fn chatter_is_kept_and_taken_out_of_the_inbox_in_one_write() {
        let gw = parts(&config()).await;
        let (d, store) = (&gw.dispatcher, gw.services.store());
        let mut chatter = to_alpha(1, "room", "ann", "the deploy is at five");
        chatter.mentions.clear();
        let before = store.jobs();
        assert_eq!(d.handle(chatter).await, Handled::Buffered);
        assert_eq!(
            store.jobs() - before,
            2,
            "filed, then kept and done together"
        );
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
        let kept = store
            .history_take(crate::store::HistoryTake {
                chat_key: &ChatKey::new(baton_contract::Platform::Local, &"room".into(), None),
                bot: &"alpha".parse().unwrap(),
                skip_sender: None,
                skip_message: None,
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(kept.len(), 1);

        let mention = to_alpha(2, "room", "bob", "@alpha hi");
        assert_eq!(d.handle(mention).await, Handled::Replied("hi".into()));
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
    }

    /// A stop's side effects happen in one place: the notice it owes is posted (and recorded),
    /// and a message kept as history is in the chat's buffer for the next turn.
    #[tokio::test]
    async fn a_stop_posts_its_notice_and_keeps_history_as_told() {
        let gw = parts(&config()).await;
        let d = &gw.dispatcher;
        let mut chatter = to_alpha(1, "room", "ann", "the deploy is at five");
        chatter.mentions.clear();
        assert_eq!(
            d.process(chatter, Arrival::Fresh, None).await,
            Handled::Buffered
        );
        let history = gw
            .services
            .store()
            .history_take(crate::store::HistoryTake {
                chat_key: &ChatKey::new(baton_contract::Platform::Local, &"room".into(), None),
                bot: &"alpha".parse().unwrap(),
                skip_sender: None,
                skip_message: None,
                limit: 10,
            })
            .await
            .unwrap();
        let texts: Vec<&str> = history.iter().map(|h| h.text.as_str()).collect();
        assert_eq!(texts, ["the deploy is at five"]);

        let first = to_alpha(2, "room", "bob", "@alpha one");
        assert_eq!(
            d.process(first, Arrival::Fresh, None).await,
            Handled::Replied("one".into())
        );
        let second = to_alpha(3, "room", "bob", "@alpha two");
        assert_eq!(
            d.process(second, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::RateLimited)
        );
        let posted: Vec<String> = gw
            .hub
            .messages("room", None)
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(posted.len(), 2, "{posted:?}");
        assert!(
            posted[1].starts_with("You're sending messages faster"),
            "{posted:?}"
        );
    }
}
