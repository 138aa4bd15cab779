//! Step 2 for chatter: a message that wakes no bot and asks nothing of one (most of a busy
//! chat's messages) is claimed and kept in its chat's history buffer in one write, at intake. It
//! is never filed in the inbox and never run: once that write commits, nothing is left to do,
//! so a crash after it has nothing to run again, and the platform is acknowledged after it as
//! after any filing.
//!
//! What counts as chatter is decided by the pipeline's own steps 3 to 6
//! ([`Dispatcher::before_turn`]), run asking before the claim: each passes the message on
//! without acting, and activation stops it to be kept as history. A message any of them
//! would act on (its own post, a line of ours, one too long, a command, a refusal, a DM that
//! needs pairing, a possible answer to a pending question, a wake, a paused bot's) is filed and
//! run as every other event.

use baton_contract::NotTaken;

use super::stop::{Mode, Stop};
use super::{Dispatcher, Inbound, Intake, decision, dedupe, guard_steps};
use crate::events::Received;
use crate::store::{Claim, dedupe_key};
use crate::timing::now_ms;

impl Dispatcher {
    /// Whether the pipeline's steps 3 to 6, asked, pass `inbound` on without acting and then
    /// keep it as history, waking nobody: the stop that says so. Only activation reads the
    /// store (the chat's settings, cached).
    pub(super) async fn is_chatter(&self, inbound: &Inbound<'_>) -> Option<Stop> {
        match self.before_turn(inbound, Mode::Ask).await {
            Err(stop) if stop.is_chatter() => Some(stop),
            _ => None,
        }
    }

    /// Claims `inbound` and keeps it as history in one write, then does what the pipeline does
    /// for a message it keeps: the bot guards hear that a human spoke, and the dashboard that
    /// the message was buffered. The decision on it (`stop`'s) is kept in the same write.
    pub(super) async fn keep_chatter(
        &self,
        inbound: &Inbound<'_>,
        stop: Stop,
    ) -> Result<Intake, NotTaken> {
        let event = &inbound.event;
        let decided = decision::of(inbound, &Err(stop));
        let claimed = self
            .engine
            .store()
            .claim_as_history(
                &dedupe::scope_of(event.platform, &event.account),
                &dedupe_key(event),
                &inbound.chat_key,
                inbound.history_entry(),
                inbound.policy.history_limit,
                now_ms(),
                Some(decided),
            )
            .await
            .map(|claim| (claim == Claim::Fresh).then_some(()));
        if self.counted(event, claimed)?.is_none() {
            return Ok(Intake::Duplicate);
        }
        guard_steps::human_spoke(&self.own.guards, inbound);
        self.engine
            .events()
            .emit(inbound.received(Received::Buffered, None));
        Ok(Intake::Kept)
    }
}
