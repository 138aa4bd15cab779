//! How a pipeline step ends an event: every step returns a [`Step`], and a [`Stop`] says what
//! became of the event, whether the sender is owed a line, and whether the message is kept as
//! history. [`Dispatcher::stopped`] performs all of that in one place, with the counters and
//! the log line, so no step carries a side effect of its own stopping.

use super::{Dispatcher, DropReason, Handled, Inbound, gateway_line};
use crate::events::{Event, Events, Received};
use crate::metrics;
use crate::store::{HistoryEntry, NewDecision};

/// What one step returns: what the next steps need, or why the event goes no further.
pub(crate) type Step<T> = Result<T, Stop>;

/// Why an event goes no further, and what stopping it owes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stop {
    /// What became of the event.
    pub handled: Handled,
    /// A line for the sender.
    pub notice: Option<Notice>,
    /// The message stays in the chat's history buffer as context for the chat's bots.
    pub keep: Keep,
    /// Why it woke no bot, when activation stopped it so (`decision.rs`).
    pub not_woken: Option<NotWoken>,
}

/// Why a message woke no bot (step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotWoken {
    /// Nobody it is addressed to is this bot.
    NotMentioned,
    /// It is addressed to other bots only.
    OnlyOtherBots,
}

impl NotWoken {
    /// As `baton why` says it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NotWoken::NotMentioned => "not mentioned",
            NotWoken::OnlyOtherBots => "mentions only other bots",
        }
    }
}

/// Whether the steps act on what they find, or only say whether they would: chatter's
/// question at intake (`chatter.rs`) runs the same steps as the pipeline, asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Act: run a command, write a pairing code, route an answer back.
    Act,
    /// Only ask: a step that would act stops instead, doing nothing.
    Ask,
}

/// Whether a stopped message is kept as history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Kept: the bots see it as context next time they are woken.
    AsHistory,
    /// Not kept.
    Nothing,
}

/// A line the gateway owes the sender of a stopped event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Posted now.
    Now(String),
    /// Posted at most once per sender per account every 10 minutes (policy refusals, pairing).
    OncePerSender(String),
    /// Posted at most once per chat a minute (the turn's queue is full: `busy.rs`).
    OncePerChat(String),
}

impl Stop {
    /// The event was dealt with (an admin command, an answer) or is history.
    pub(crate) fn handled(handled: Handled) -> Stop {
        Stop {
            handled,
            notice: None,
            keep: Keep::Nothing,
            not_woken: None,
        }
    }

    /// The event is dropped for `reason`.
    pub(crate) fn dropped(reason: DropReason) -> Stop {
        Stop::handled(Handled::Dropped(reason))
    }

    /// The sender is told `notice`.
    pub(crate) fn with_notice(self, notice: Notice) -> Stop {
        Stop {
            notice: Some(notice),
            ..self
        }
    }

    /// The message is kept in the chat's history buffer.
    pub(crate) fn keep_as_history(self) -> Stop {
        Stop {
            keep: Keep::AsHistory,
            ..self
        }
    }

    /// Activation woke nobody, for `why`.
    pub(crate) fn not_woken(self, why: NotWoken) -> Stop {
        Stop {
            not_woken: Some(why),
            ..self
        }
    }

    /// Chatter: woke nobody, kept as history, owes nothing (`chatter.rs`).
    pub(crate) fn is_chatter(&self) -> bool {
        self.handled == Handled::Buffered && self.keep == Keep::AsHistory && self.notice.is_none()
    }
}

impl Dispatcher {
    /// Perform what `stop` owes (its counters, the notice, the history buffer) and return what
    /// became of the event; `decided` (the decision on it) is kept in the run's last write.
    pub(super) async fn stopped(
        &self,
        inbound: &Inbound<'_>,
        stop: Stop,
        decided: NewDecision,
    ) -> Handled {
        let engine = &self.engine;
        let chat = || Some(inbound.settings_key.clone());
        let (outcome, reason) = match &stop.handled {
            Handled::Buffered => (Received::Buffered, None),
            Handled::Admin(_) => (Received::Admin, None),
            Handled::Answered(_) => (Received::Answered, None),
            Handled::Dropped(reason) => (Received::Dropped, Some(reason.as_str())),
            other => (Received::Dropped, Some(format!("{other:?}"))),
        };
        // A busy refusal comes after the turn step announced the wake: one announcement per
        // event.
        if !matches!(stop.handled, Handled::Dropped(DropReason::Busy(_))) {
            announce(engine.events(), inbound, outcome, reason);
        }
        match &stop.handled {
            Handled::Dropped(DropReason::BotGuard(refusal)) => {
                let reason = refusal.as_str();
                engine.metrics().add(&metrics::BOT_MESSAGE_REFUSALS, reason);
                engine.refused("bot_messages", reason, chat(), inbound.bot());
                tracing::info!(bot = %inbound.bot(), reason, "bot message refused");
            }
            Handled::Dropped(DropReason::RateLimited) => {
                engine.refused("inbound_rate", "per-sender", chat(), inbound.bot());
            }
            _ => {}
        }
        match &stop.notice {
            Some(Notice::Now(text)) => gateway_line::notice(engine, inbound, text).await,
            Some(Notice::OncePerSender(text)) => self.notify_once(inbound, text).await,
            Some(Notice::OncePerChat(text))
                if self.own.busy_notices.check(&inbound.settings_key).is_ok() =>
            {
                gateway_line::notice(engine, inbound, text).await;
            }
            Some(Notice::OncePerChat(_)) | None => {}
        }
        match stop.keep {
            Keep::AsHistory => self.buffer(inbound, decided).await,
            Keep::Nothing => self.finish(inbound.filed, Some(decided)).await,
        }
        stop.handled
    }

    /// A policy notice, at most once per sender per account every 10 minutes.
    async fn notify_once(&self, inbound: &Inbound<'_>, text: &str) {
        let key = (inbound.account.id.clone(), inbound.event.sender.id.clone());
        if self.own.notices.check(&key).is_ok() {
            gateway_line::notice(&self.engine, inbound, text).await;
        }
    }

    /// Keep an un-activated message as context for the chat's bots; the event's run ends in
    /// the same write, with `decided`.
    async fn buffer(&self, inbound: &Inbound<'_>, decided: NewDecision) {
        let limit = inbound.policy.history_limit;
        if limit == 0 {
            return self.finish(inbound.filed, Some(decided)).await;
        }
        let entry = history_entry(inbound);
        let store = self.engine.store();
        let kept = match inbound.filed {
            Some(id) => {
                store
                    .inbox_done_as_history(id, &inbound.chat_key, entry, limit, Some(decided))
                    .await
            }
            None => {
                let pushed = store.history_push(&inbound.chat_key, entry, limit).await;
                self.finish(None, Some(decided)).await;
                pushed
            }
        };
        if let Err(err) = kept {
            // Its row is still filed as this instance's, which nothing else would ever run
            // while this instance lives: hand it back to be run again (its push is idempotent).
            tracing::error!(%err, "could not keep the message in the history buffer; it is run again once the store writes");
            self.run_again(inbound.filed).await;
        }
    }
}

/// Announce what became of `inbound` on `events`: it woke the bot (the turn step announces
/// that as it starts), or it stopped here.
pub(super) fn announce(
    events: &Events,
    inbound: &Inbound<'_>,
    outcome: Received,
    reason: Option<String>,
) {
    let event = &inbound.event;
    events.emit(Event::EventReceived {
        platform: event.platform,
        account: inbound.account.id.clone(),
        bot: inbound.bot().clone(),
        chat: inbound.chat_key.clone(),
        message_id: event.message_id.clone(),
        sender: inbound.speaker.label.clone(),
        outcome,
        reason,
    });
}

/// `inbound`'s message as its chat's history buffer keeps it.
pub(super) fn history_entry(inbound: &Inbound<'_>) -> HistoryEntry {
    HistoryEntry {
        message_id: inbound.event.message_id.as_str().to_owned(),
        sender_id: inbound.event.sender.id.as_str().to_owned(),
        speaker: inbound.speaker.name.clone(),
        text: inbound.event.text.clone(),
        ts_ms: inbound.event.timestamp_ms,
    }
}
