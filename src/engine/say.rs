//! A line posted through a bot's account that is not the bot's turn: the gateway's notices,
//! admin answers and error replies, a chain's own lines and posts, a bot's question to the
//! humans. Each is remembered before it is sent, so no bot in the chat takes it for a message
//! to answer (and no arrival can race it), then delivered and recorded in the account's session
//! under the line's run id.

use baton_contract::{ChatKey, MessageId};
use serde_json::json;

use super::Engine;
use super::journal::journal;
use crate::post::{DeliveryFailed, Target, deliver};
use crate::roster::Account;
use crate::session::SessionKey;
use crate::store::EntryKind;

/// One line to post.
pub(crate) struct Line<'a> {
    /// Whose account posts it.
    pub account: &'a Account,
    /// The account's session there, where the line is recorded.
    pub session: &'a SessionKey,
    /// The run it is recorded under; derived from its cause, so a replay posts nothing twice.
    pub run_id: String,
    /// The chat key (`<platform>:<chat>[:thread:<id>]`) in which the line must wake no bot.
    pub quiet_in: ChatKey,
    /// Where it goes.
    pub target: Target,
    /// What kind of line, as a failure to post it is recorded (`notice`, `chain`, ...).
    pub stage: &'static str,
    /// The words.
    pub text: &'a str,
}

/// Post `line`. A failure is logged and recorded in the session's transcript, and returned.
pub(crate) async fn say(engine: &Engine, line: Line<'_>) -> Result<Vec<MessageId>, DeliveryFailed> {
    let bot = line.account.bot.id();
    engine
        .own_notices()
        .remember(&line.quiet_in, bot, line.text);
    let journal = journal(engine, line.session, line.run_id).await;
    let handover = engine.handover(line.account);
    let adapter = &*line.account.adapter;
    let posted = deliver(adapter, &handover, &line.target, line.text, journal.pen()).await;
    if let Err(err) = &posted {
        tracing::warn!(%bot, %err, stage = line.stage, "line not delivered");
        let meta = json!({"stage": line.stage});
        journal
            .bot_did(EntryKind::Failure, &err.to_string(), meta)
            .await;
    }
    posted
}
