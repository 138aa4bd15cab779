//! Step 2, continued: the inbox, so an event accepted before a kill -9 is still answered.
//!
//! Every fresh event is filed in the store together with its dedupe claim, before the platform
//! is acknowledged, and taken out when its run ends. At the next start, each account picks up
//! what it left (once it is connected, so it knows its own identity again) and runs it again.
//! A reply cut off mid-post is not posted twice: the delivery step sees the begun post and
//! records a failure instead. An event that was being run again each of the last
//! [`MAX_ATTEMPTS`] times the process died is taken to be what kills it, and is given up on,
//! with the failure in the bot's transcript.

use std::time::Duration;

use baton_contract::{AccountId, InboundEvent, Platform};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Dispatcher, dedupe, turn_step};
use crate::engine::journal;
use crate::metrics;
use crate::mirror::Arrival;
use crate::roster::Account;
use crate::store::{EntryKind, Filing, InboxId, Store, StoreError, Unfinished};

/// How many times a left-over event is run again before it is given up on.
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// How often an account that is not connected yet is looked at again.
const READY_POLL: Duration = Duration::from_millis(20);

/// Claim `event` and file it; `None` is a duplicate.
pub(super) async fn file(
    store: &Store,
    event: &InboundEvent,
    now_ms: i64,
) -> Result<Option<InboxId>, StoreError> {
    store.file(Filing::of(event)?, now_ms).await
}

/// What one account left unfinished, read at start before it connects.
pub struct LeftOver {
    platform: Platform,
    account: AccountId,
    events: Vec<Unfinished>,
}

impl Dispatcher {
    /// Every account's unfinished events. Call it before the accounts connect: an event filed
    /// after it is being handled by this process, and must not be run twice.
    pub async fn unfinished(&self) -> Result<Vec<LeftOver>, StoreError> {
        let mut all = Vec::new();
        for account in self.shared.roster().accounts() {
            let scope = dedupe::scope_of(account.platform, &account.id);
            let events = self.shared.store().inbox_left(&scope).await?;
            if !events.is_empty() {
                tracing::info!(events = events.len(), %scope, "events left unfinished by the last stop");
                all.push(LeftOver {
                    platform: account.platform,
                    account: account.id.clone(),
                    events,
                });
            }
        }
        Ok(all)
    }

    /// Run `left` again, once its account is connected (so it knows its own identity again and
    /// can post); returns early on `stop`.
    pub async fn rerun_unfinished(self, left: LeftOver, stop: CancellationToken) {
        let Some(acct) = self.shared.roster().account(left.platform, &left.account) else {
            return;
        };
        while !acct.adapter.connection_state().is_ready() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(READY_POLL) => {}
            }
        }
        // One at a time, in the order they came: replies keep the chat's order, and a crash
        // counts against the one event that was running, not against all that were waiting.
        for row in left.events {
            if self.shared.tasks().is_closed() {
                return;
            }
            self.rerun(acct, row).await;
        }
    }

    async fn rerun(&self, account: &Account, row: Unfinished) {
        let event = match serde_json::from_str::<InboundEvent>(&row.event) {
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
        if let Err(err) = self.shared.store().inbox_attempt(row.id).await {
            tracing::error!(%err, "cannot count a rerun; leaving the event for the next start");
            return;
        }
        self.shared
            .metrics()
            .add(&metrics::EVENTS_RECOVERED, "rerun");
        let run = self.run_filed(row.id, event, Arrival::Replayed);
        let handled = self.shared.tasks().track_future(run).await;
        tracing::debug!(?handled, "unfinished event handled");
    }

    /// Record in the bot's transcript that the event was never answered.
    async fn give_up(&self, account: &Account, event: InboundEvent, attempts: u32) {
        self.shared
            .metrics()
            .add(&metrics::EVENTS_RECOVERED, "given-up");
        let text = format!(
            "message {} was not answered: the gateway stopped while handling it {} times; \
             given up so it cannot stop the gateway again",
            event.message_id, attempts
        );
        tracing::error!(message = %event.message_id, attempts, "{text}");
        let inbound = self.inbound(event, account, Arrival::Replayed, None);
        let run_id = turn_step::run_id(&inbound, "in");
        journal(&self.shared, &inbound.session(), run_id)
            .await
            .bot_did(EntryKind::Failure, &text, json!({"stage": "recover"}))
            .await;
    }

    /// The run of `filed` ended: take it out of the inbox.
    pub(super) async fn finish(&self, filed: Option<InboxId>) {
        let Some(id) = filed else {
            return;
        };
        if let Err(err) = self.shared.store().inbox_done(id).await {
            tracing::error!(%err, "could not take an event out of the inbox");
        }
    }
}
