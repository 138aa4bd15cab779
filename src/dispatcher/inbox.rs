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
use crate::store::{EntryKind, Filing, InboxId, Store, StoreError, Unfinished};

/// How many times a left-over event is run again before it is given up on.
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// Claim `event` and file it; `None` is a duplicate.
pub(super) async fn file(
    store: &Store,
    event: &InboundEvent,
    now_ms: i64,
) -> Result<Option<InboxId>, StoreError> {
    store.file(Filing::of(event), now_ms).await
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
                self.finish(Some(row.id)).await;
                return;
            }
        };
        if row.attempts >= MAX_ATTEMPTS {
            self.give_up(account, event, row.attempts).await;
            self.finish(Some(row.id)).await;
            return;
        }
        if let Err(err) = self.engine.store().inbox_attempt(row.id).await {
            tracing::error!(%err, "cannot count a rerun; leaving the event for the next start");
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

    /// The run of `filed` ended: take it out of the inbox.
    pub(super) async fn finish(&self, filed: Option<InboxId>) {
        let Some(id) = filed else {
            return;
        };
        if let Err(err) = self.engine.store().inbox_done(id).await {
            tracing::error!(%err, "could not take an event out of the inbox");
        }
    }
}
