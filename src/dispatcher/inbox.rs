//! Step 2, continued: the inbox, so an event accepted before a kill -9 is still answered.
//!
//! Every fresh event is filed in the store together with its dedupe claim, before the platform
//! is acknowledged, and taken out when its run ends. At the next start, each account picks up
//! what it left (once it is connected, so it knows its own identity again) and runs it again.
//! A reply cut off mid-post is not posted twice: the delivery step sees the begun post and
//! records a failure instead. An event that has already been picked up [`MAX_ATTEMPTS`] times
//! keeps killing the process, so it is given up on, with the failure in the bot's transcript.

use std::time::Duration;

use baton_contract::{InboundEvent, Platform};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Dispatcher, dedupe, turn_step};
use crate::metrics;
use crate::roster::Account;
use crate::store::{EntryKind, InboxId, Store, StoreError, Unfinished};

/// How many starts may pick up one event before it is given up on.
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// How often an account that is not connected yet is looked at again.
const READY_POLL: Duration = Duration::from_millis(20);

/// Claim `event` and file it; `None` is a duplicate.
pub(super) async fn file(
    store: &Store,
    event: &InboundEvent,
    now_ms: i64,
) -> Result<Option<InboxId>, StoreError> {
    let json = serde_json::to_string(event)
        .map_err(|e| StoreError::Internal(format!("cannot serialize an event: {e}")))?;
    store
        .accept(&dedupe::scope(event), &dedupe::keys(event), json, now_ms)
        .await
}

impl Dispatcher {
    /// Run again what the account `platform`/`account` accepted and never finished before the
    /// last stop. Waits until the account is connected; returns early on `stop`.
    pub async fn rerun_unfinished(
        self,
        platform: Platform,
        account: baton_contract::AccountId,
        stop: CancellationToken,
    ) {
        let Some(acct) = self.shared.roster.account(platform, &account) else {
            return;
        };
        while !acct.adapter.connection_state().is_ready() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(READY_POLL) => {}
            }
        }
        let scope = dedupe::scope_of(platform, &account);
        let left = match self.shared.store.inbox_reopen(&scope).await {
            Ok(left) => left,
            Err(err) => {
                tracing::error!(%err, %scope, "cannot read the events left unfinished");
                return;
            }
        };
        if !left.is_empty() {
            tracing::info!(events = left.len(), %scope, "running events left unfinished by the last stop");
        }
        for row in left {
            self.rerun(acct, row).await;
        }
    }

    async fn rerun(&self, account: &Account, row: Unfinished) {
        let event = match serde_json::from_str::<InboundEvent>(&row.event) {
            Ok(event) => event,
            Err(err) => {
                tracing::error!(%err, id = row.id.0, "an unfinished event cannot be read; dropped");
                self.finish(row.id).await;
                return;
            }
        };
        if row.attempts > MAX_ATTEMPTS {
            self.give_up(account, event, row.attempts).await;
            self.finish(row.id).await;
            return;
        }
        self.shared.metrics.add(&metrics::EVENTS_RECOVERED, "rerun");
        self.spawn_filed(row.id, event);
    }

    /// Record in the bot's transcript that the event was never answered.
    async fn give_up(&self, account: &Account, event: InboundEvent, attempts: u32) {
        self.shared
            .metrics
            .add(&metrics::EVENTS_RECOVERED, "given-up");
        let text = format!(
            "message {} was not answered: the gateway stopped while handling it {} times; \
             given up so it cannot stop the gateway again",
            event.message_id,
            attempts - 1
        );
        tracing::error!(message = %event.message_id, attempts, "{text}");
        let inbound = self.inbound(event, account);
        let journal = turn_step::journal(&self.shared, &inbound, "in");
        journal
            .bot_did(EntryKind::Failure, &text, json!({"stage": "recover"}))
            .await;
    }

    async fn finish(&self, id: InboxId) {
        if let Err(err) = self.shared.store.inbox_done(id).await {
            tracing::error!(%err, "could not take an event out of the inbox");
        }
    }

    /// Run a filed event's pipeline in the background (tracked, so a shutdown drains it).
    pub(super) fn spawn_filed(&self, filed: InboxId, event: InboundEvent) {
        let this = self.clone();
        self.shared.tasks.spawn(async move {
            let handled = this.run_filed(filed, event).await;
            tracing::debug!(?handled, "event handled");
        });
    }
}
