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

#[cfg(test)]
mod tests {
    use baton_contract::{ChatKey, Platform};

    use crate::dispatcher::Refusal;
    use crate::store::{DecisionQuery, HistoryTake};

    use super::super::decision;
    use super::super::testing::{inbound, to_bot};
    use super::*;
    use crate::gateway::testing::{Parts, echo_config, parts, room_texts};
    use crate::guards::BotRefusal;
    use crate::lanes::QueueFull;

    /// Perform `stop` for message `n` from `from` to `alpha` in `room`.
    async fn stop_with(gw: &Parts, n: u32, from: &str, stop: Stop) -> Handled {
        let d = &gw.dispatcher;
        let inbound = inbound(d, to_bot("alpha", n, "room", from, "hello there"));
        let decided = decision::of(&inbound, &Err(stop.clone()));
        d.stopped(&inbound, stop, decided).await
    }

    /// What `room`'s history buffer holds for `alpha`.
    async fn buffered(gw: &Parts) -> Vec<String> {
        let (chat_key, bot) = (
            ChatKey::new(Platform::Local, &"room".into(), None),
            "alpha".parse().unwrap(),
        );
        let kept = gw.engine.store().history_take(HistoryTake {
            chat_key: &chat_key,
            bot: &bot,
            skip_sender: None,
            skip_message: None,
            limit: 10,
        });
        kept.await
            .unwrap()
            .into_iter()
            .map(|h| h.message_id)
            .collect()
    }

    /// A line owed now is posted each time; one owed once per sender is posted once for each
    /// sender, however many of their messages are refused.
    #[tokio::test]
    async fn a_notice_is_posted_each_time_or_once_per_sender_as_owed() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let refused = || Stop::dropped(DropReason::Policy(Refusal::DmNotAllowed));
        for (n, from) in [(1, "ann"), (2, "ann"), (3, "bob")] {
            let once = refused().with_notice(Notice::OncePerSender(format!("once {from}")));
            assert_eq!(
                stop_with(&gw, n, from, once).await,
                Handled::Dropped(DropReason::Policy(Refusal::DmNotAllowed))
            );
        }
        assert_eq!(room_texts(&gw, "room").await, ["once ann", "once bob"]);
        for n in [4, 5] {
            let now = refused().with_notice(Notice::Now(format!("now {n}")));
            stop_with(&gw, n, "ann", now).await;
        }
        assert_eq!(
            room_texts(&gw, "room").await,
            ["once ann", "once bob", "now 4", "now 5"]
        );
    }

    /// A stop that keeps its message puts it in the chat's buffer; one that does not, does
    /// not. Either way the decision on the event is kept.
    #[tokio::test]
    async fn a_message_is_buffered_only_when_its_stop_keeps_it_and_each_decision_is_kept() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let kept = Stop::handled(Handled::Buffered).keep_as_history();
        assert_eq!(stop_with(&gw, 1, "ann", kept).await, Handled::Buffered);
        let paused = Stop::dropped(DropReason::Paused);
        stop_with(&gw, 2, "ann", paused).await;
        assert_eq!(buffered(&gw).await, ["m1"]);
        for id in ["m1", "m2"] {
            let decided = gw
                .engine
                .store()
                .decisions(DecisionQuery::Message(id.into()));
            assert_eq!(decided.await.unwrap().len(), 1, "{id}'s decision");
        }
    }

    /// In a chat that keeps no history, a stop that would keep its message keeps nothing but
    /// still keeps its decision.
    #[tokio::test]
    async fn with_no_history_kept_a_kept_message_still_keeps_its_decision() {
        let config = echo_config(&["alpha"], "").replace(
            "activation = \"mention\"\n",
            "activation = \"mention\"\nhistory_limit = 0\n",
        );
        let gw = parts(&config).await;
        let kept = Stop::handled(Handled::Buffered).keep_as_history();
        assert_eq!(stop_with(&gw, 1, "ann", kept).await, Handled::Buffered);
        assert!(buffered(&gw).await.is_empty());
        let decided = gw
            .engine
            .store()
            .decisions(DecisionQuery::Message("m1".into()));
        assert_eq!(decided.await.unwrap().len(), 1);
    }

    /// Every stop is announced on the event stream with its reason, except a busy refusal,
    /// which the turn step announced as a wake already: one announcement per event.
    #[tokio::test]
    async fn every_stop_but_a_busy_one_is_announced_with_its_reason() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let mut stream = gw.engine.events().subscribe(None);
        stop_with(&gw, 1, "ann", Stop::dropped(DropReason::Paused)).await;
        let busy = DropReason::Busy(QueueFull::Session { max: 1 });
        stop_with(&gw, 2, "ann", Stop::dropped(busy)).await;
        stop_with(&gw, 3, "ann", Stop::handled(Handled::Admin("ok".into()))).await;
        let mut told = Vec::new();
        while let Ok(stamped) = stream.live.try_recv() {
            if let crate::events::Event::EventReceived {
                message_id,
                outcome,
                reason,
                ..
            } = &stamped.event
            {
                told.push((message_id.to_string(), *outcome, reason.clone()));
            }
        }
        assert_eq!(
            told,
            [
                ("m1".into(), Received::Dropped, Some("paused".into())),
                ("m3".into(), Received::Admin, None),
            ]
        );
    }

    /// A bot message the bot guard refused is counted by its reason, for `/metrics`.
    #[tokio::test]
    async fn a_bot_guard_refusal_is_counted_by_its_reason() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let refused = Stop::dropped(DropReason::BotGuard(BotRefusal::NotAllowed));
        stop_with(&gw, 1, "beta", refused.keep_as_history()).await;
        let counted = gw
            .engine
            .metrics()
            .get(&metrics::BOT_MESSAGE_REFUSALS, "bot_not_allowed");
        assert_eq!(counted, 1);
    }
}
