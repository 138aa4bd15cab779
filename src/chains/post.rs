//! Saying things in a chain's chat: a bot's post under its own account, and baton's own lines
//! (opened, a turn timed out, closed) through the chain's voice account.
//!
//! Every line is remembered as the gateway's before it is sent, so no bot in the chat takes it
//! as a message to answer: in a chain, turns are given by the chain, never by the chat. Without
//! this, a chain post mentioning another bot (or any post, for an `always` bot) would wake bots
//! out of turn — the very noise chains exist to stop.

use baton_contract::MessageId;

use super::place::Place;
use crate::engine::{self, Engine, Line};
use crate::roster::Account;

/// Post `text` in `place` through `account`, recorded in that account's session there under
/// `run_id` (which makes a replay post nothing twice). Returns the first posted message's id; a
/// failure is recorded in the transcript and logged, never silently lost.
pub(super) async fn say(
    engine: &Engine,
    place: &Place,
    account: &Account,
    run_id: String,
    text: &str,
) -> Option<MessageId> {
    let session = place.session(account);
    let line = Line {
        account,
        session: &session,
        run_id,
        quiet_in: place.chat_key(),
        target: place.target(),
        stage: "chain",
        text,
    };
    let posted = engine::say(engine, line).await.ok()?;
    posted.into_iter().next()
}

/// baton's own line about a chain, through the chain's voice account.
pub(super) async fn baton_says(
    engine: &Engine,
    place: &Place,
    run_id: String,
    text: &str,
) -> Option<MessageId> {
    let Some(account) = place.voice(engine) else {
        tracing::warn!(account = %place.account, "the chain's account is gone; line not posted");
        return None;
    };
    say(engine, place, account, run_id, text).await
}
