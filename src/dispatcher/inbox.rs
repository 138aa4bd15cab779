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
