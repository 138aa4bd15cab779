//! An event handled: [`Dispatcher::stopped`] performs what a [`Stop`] owes (its counters, the
//! notice, the history buffer) in one place, with the log line, so no step carries a side
//! effect of its own stopping. It stands above the steps and imports none of them: they say how
//! an event stops (`stop.rs`), this does it.

use super::stop::{DropReason, Handled, Keep, Notice, Stop};
use super::{Dispatcher, Inbound, gateway_line};
use crate::events::Received;
use crate::metrics;
use crate::store::NewDecision;

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
            engine.events().emit(inbound.received(outcome, reason));
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
        let entry = inbound.history_entry();
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
