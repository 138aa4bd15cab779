//! Step 2, continued: the inbox, so an event accepted before a kill -9 is still answered.
//!
//! Every fresh event but chatter (`chatter.rs`, kept as history in its claim's write, with nothing
//! left to run) is filed in the store together with its dedupe claim, before the platform is
//! acknowledged, and taken out when its run ends. What a stopped process left (this
//! instance's previous one, or another instance that died: issue 22) is taken over by the
//! instance serving the account, once it is connected (so it knows its own identity again), and
//! run again.
//! A reply cut off mid-post is not posted twice: the delivery step sees the begun post and
//! records a failure instead. An event that was being run again each of the last
//! [`MAX_ATTEMPTS`] times the process died is taken to be what kills it, and is given up on,
//! with the failure in the bot's transcript.
//!
//! A run that ends while the store cannot write (PostgreSQL restarting, or out of reach) cannot
//! take its event out of the inbox, and may not have recorded its failure either; a rerun that
//! cannot count its attempt does not start. Such a row is kept in memory and handed back (made nobody's) once the store writes again, so that the
//! loop below runs it again like any left-over: the platform was acknowledged, nothing else
//! would ever answer it while this instance lives.

use std::time::Duration;

use baton_contract::{ConnectionState, InboundEvent};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::{Dispatcher, dedupe, gateway_line};
use crate::cluster::Holding;
use crate::engine::journal;
use crate::metrics;
use crate::pen::Arrival;
use crate::roster::Account;
use crate::store::{EntryKind, Filing, InboxId, NewDecision, Store, StoreError, Unfinished};

/// How many times a left-over event is run again before it is given up on.
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// Claim `event` and file it; `None` is a duplicate, which keeps `duplicate` (the decision
/// on it) where there is one.
pub(super) async fn file(
    store: &Store,
    event: &InboundEvent,
    now_ms: i64,
    duplicate: Option<NewDecision>,
) -> Result<Option<InboxId>, StoreError> {
    store.file(Filing::of(event), now_ms, duplicate).await
}

impl Dispatcher {
    /// Run again, one at a time and in the order they came, the events of account number
    /// `index` (in the roster) that no live instance runs: those this instance's previous
    /// process left, and those of an instance that died or stopped before finishing them. They
    /// are looked for whenever this instance serves the account: once the account is connected
    /// (so it knows its own identity again and can post), again at each change of its
    /// connection, and every third of `cluster.lease_seconds` (an instance is dead once its
    /// registration is a lease old). A socket account is served by the holder of its lease
    /// (`holding`) only; a webhook account (`None`) by every instance, and the store gives
    /// each event to exactly one of them. Returns on `stop`.
    pub async fn recover_left_overs(
        self,
        index: usize,
        holding: Option<watch::Receiver<Holding>>,
        stop: CancellationToken,
    ) {
        let account = &self.engine.roster().accounts()[index];
        let scope = dedupe::scope_of(account.platform, &account.id);
        let lease = Duration::from_secs(self.engine.config().cluster.lease_seconds);
        let stale_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let mut tick = tokio::time::interval(lease / 3);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut state = account.adapter.connection().watch();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
                changed = state.changed() => if changed.is_err() { return },
            }
            let connected = matches!(
                *state.borrow_and_update(),
                ConnectionState::Connected | ConnectionState::Retrying { .. }
            );
            let held = holding.as_ref().is_none_or(|h| h.borrow().now());
            if !(connected && held) {
                continue;
            }
            self.hand_back_unfinished().await;
            let left = match self.engine.store().inbox_adopt(&scope, stale_ms).await {
                Ok(left) => left,
                Err(err) => {
                    tracing::warn!(%err, %scope, "could not look for events left unfinished; trying again");
                    continue;
                }
            };
            if !left.is_empty() {
                tracing::info!(events = left.len(), %scope, "running again events left unfinished by a stopped process");
            }
            // One at a time, in the order they came: replies keep the chat's order, and a crash
            // counts against the one event that was running, not against all that were waiting.
            for row in left {
                if self.engine.tasks().is_closed() || stop.is_cancelled() {
                    return;
                }
                self.rerun(account, row).await;
            }
        }
    }

    async fn rerun(&self, account: &Account, row: Unfinished) {
        let event = match row.event() {
            Ok(event) => event,
            Err(err) => {
                tracing::error!(%err, id = row.id.0, "an unfinished event cannot be read; dropped");
                self.finish(Some(row.id), None).await;
                return;
            }
        };
        if row.attempts >= MAX_ATTEMPTS {
            self.give_up(account, event, row.attempts).await;
            self.finish(Some(row.id), None).await;
            return;
        }
        if let Err(err) = self.engine.store().inbox_attempt(row.id).await {
            tracing::error!(%err, "cannot count a rerun; it is run again once the store writes");
            self.unfinished().push(row.id);
            return;
        }
        self.engine
            .metrics()
            .add(&metrics::EVENTS_RECOVERED, "rerun");
        let run = self.run_filed(row.id, event, Arrival::Replayed);
        let handled = self.engine.tasks().track_future(run).await;
        tracing::debug!(?handled, "unfinished event handled");
    }

    /// Record in the bot's transcript that the event was never answered.
    async fn give_up(&self, account: &Account, event: InboundEvent, attempts: u32) {
        self.engine
            .metrics()
            .add(&metrics::EVENTS_RECOVERED, "given-up");
        let text = format!(
            "message {} was not answered: the gateway stopped while handling it {} times; \
             given up so it cannot stop the gateway again",
            event.message_id, attempts
        );
        tracing::error!(message = %event.message_id, attempts, "{text}");
        let inbound = self.inbound(event, account, Arrival::Replayed, None);
        let run_id = gateway_line::run_id(&inbound, "in");
        journal(&self.engine, &inbound.session(), run_id)
            .await
            .bot_did(EntryKind::Failure, &text, json!({"stage": "recover"}))
            .await;
    }

    /// The run of `filed` ended: take it out of the inbox, keeping `decided` (what the
    /// pipeline made of it) in the same write; a run that was never filed keeps it alone.
    pub(super) async fn finish(&self, filed: Option<InboxId>, decided: Option<NewDecision>) {
        let store = self.engine.store();
        let done = match (filed, decided) {
            (Some(id), decided) => store.inbox_done(id, decided).await,
            (None, Some(decided)) => store.decision_put(decided).await,
            (None, None) => return,
        };
        if let Err(err) = done {
            tracing::error!(%err, "could not take an event out of the inbox; it is run again once the store writes");
            if let Some(id) = filed {
                self.unfinished().push(id);
            }
        }
    }

    /// The run of `filed` ended while the store had trouble writing: hand the event back to be
    /// run again (now, or once the store writes).
    pub(super) async fn run_again(&self, filed: Option<InboxId>) {
        let Some(id) = filed else { return };
        tracing::warn!("a run ended after the store refused writes; its event is run again");
        self.unfinished().push(id);
        self.hand_back_unfinished().await;
    }

    fn unfinished(&self) -> std::sync::MutexGuard<'_, Vec<InboxId>> {
        self.own
            .unfinished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Make the rows [`Dispatcher::finish`] could not take out nobody's, for the serving
    /// instance (this one or another) to run again; kept to try again if the store still fails.
    async fn hand_back_unfinished(&self) {
        let ids = std::mem::take(&mut *self.unfinished());
        if ids.is_empty() {
            return;
        }
        if let Err(err) = self.engine.store().inbox_hand_back(ids.clone()).await {
            tracing::warn!(%err, "could not hand back events whose run ended without the store; trying again");
            self.unfinished().extend(ids);
            return;
        }
        tracing::info!(
            events = ids.len(),
            "events whose run ended without the store are run again"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{allow, inbound, refuse, to_bot};
    use super::super::{DropReason, decision, stop::Stop};
    use super::*;
    use crate::engine::testing::transcript;
    use crate::gateway::testing::{Parts, echo_config, parts, room_texts};
    use crate::store::DecisionQuery;

    /// `@alpha hi` from `ann` in `room`, filed in `alpha`'s inbox, with the run counted
    /// `attempts` times; the row as the recovery finds it.
    async fn left_over(gw: &Parts, attempts: u32) -> Unfinished {
        let store = gw.engine.store();
        let event = to_bot("alpha", 1, "room", "ann", "@alpha hi");
        let id = file(store, &event, 1, None).await.unwrap().expect("fresh");
        for _ in 0..attempts {
            store.inbox_attempt(id).await.unwrap();
        }
        let mut left = store.inbox_left("local:alpha").await.unwrap();
        assert_eq!(left.len(), 1);
        left.remove(0)
    }

    /// An event is filed with its claim, once: a redelivery files nothing more.
    #[tokio::test]
    async fn an_event_is_filed_once() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let store = gw.engine.store();
        let event = to_bot("alpha", 1, "room", "ann", "@alpha hi");
        assert!(file(store, &event, 1, None).await.unwrap().is_some());
        assert_eq!(file(store, &event, 2, None).await.unwrap(), None);
        assert_eq!(store.inbox_left("local:alpha").await.unwrap().len(), 1);
    }

    /// A left-over event run fewer than [`MAX_ATTEMPTS`] times is run again, counted, and
    /// taken out once answered.
    #[tokio::test]
    async fn a_left_over_event_is_run_again_and_taken_out() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let row = left_over(&gw, MAX_ATTEMPTS - 1).await;
        let account = &gw.engine.roster().accounts()[0];
        gw.dispatcher.rerun(account, row).await;
        assert_eq!(room_texts(&gw, "room").await, ["hi"]);
        let store = gw.engine.store();
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
        let reruns = gw.engine.metrics().get(&metrics::EVENTS_RECOVERED, "rerun");
        assert_eq!(reruns, 1);
    }

    /// An event left over [`MAX_ATTEMPTS`] times is taken to be what stops the gateway: it is
    /// not run again but given up on, with the failure in the bot's transcript, and taken out.
    #[tokio::test]
    async fn an_event_left_over_too_often_is_given_up_on_record() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let row = left_over(&gw, MAX_ATTEMPTS).await;
        let account = &gw.engine.roster().accounts()[0];
        gw.dispatcher.rerun(account, row).await;
        assert!(room_texts(&gw, "room").await.is_empty(), "not run again");
        let store = gw.engine.store();
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
        let session = "bot:alpha:local:alpha:room".parse().unwrap();
        let entries = transcript(&gw.engine, &session).await;
        let failures: Vec<_> = entries
            .iter()
            .filter(|e| e.kind == EntryKind::Failure)
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(failures.len(), 1, "{entries:?}");
        assert!(
            failures[0].starts_with(
                "message m1 was not answered: the gateway stopped while handling it 3 times"
            ),
            "{failures:?}"
        );
    }

    /// A run's end takes its row out with the decision in the same write; a run never filed
    /// keeps its decision alone.
    #[tokio::test]
    async fn a_run_ends_with_its_row_out_and_its_decision_kept() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let (d, store) = (&gw.dispatcher, gw.engine.store());
        let row = left_over(&gw, 0).await;
        for (n, filed) in [(1, Some(row.id)), (2, None)] {
            let inbound = inbound(d, to_bot("alpha", n, "room", "ann", "hi"));
            let decided = decision::of(&inbound, &Err(Stop::dropped(DropReason::Paused)));
            d.finish(filed, Some(decided)).await;
            let kept = store.decisions(DecisionQuery::Message(format!("m{n}")));
            assert_eq!(kept.await.unwrap().len(), 1, "m{n}'s decision");
        }
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
    }

    /// A row the store would not take out is handed back (made nobody's, for the serving
    /// instance to run again) once the store writes again.
    #[tokio::test]
    async fn a_row_the_store_would_not_take_out_is_handed_back_once_it_writes() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let (d, store) = (&gw.dispatcher, gw.engine.store());
        store.instance_register("solo", "test", 1).await.unwrap();
        let row = left_over(&gw, 0).await;
        assert_ne!(row.owner, "", "filed as this instance's");
        refuse(store, "DELETE", "inbox").await;
        d.finish(Some(row.id), None).await;
        allow(store).await;
        assert_ne!(store.inbox_left("local:alpha").await.unwrap()[0].owner, "");
        d.hand_back_unfinished().await;
        let left = store.inbox_left("local:alpha").await.unwrap();
        assert_eq!(left.len(), 1, "still to run");
        assert_eq!(left[0].owner, "", "handed back");
    }
}
