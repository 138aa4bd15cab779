//! A reply whose flow still has a say when the turn ends: a chain turn's reply is the chain's
//! post only if the turn is still the bot's (the chain may have closed, the turn may have moved
//! on, or the bot may have posted with `chain_message` already).
//!
//! Such a reply streams like any other (`feedback.rs`), so the flow is asked twice: before the
//! first post ([`ReplyGate::open`]: no post appears for a turn that is no longer the bot's) and
//! once the reply is finished ([`ReplyGate::admit`], which records it in the flow). A reply
//! refused at the end has its streamed posts deleted. Its posts are the flow's to announce, not
//! the chat's: each is remembered as the gateway's line before it is posted, so no bot in the
//! chat takes it as a message to answer.

use async_trait::async_trait;
use baton_contract::ChatKey;

/// Why a flow does not take a reply (said in the transcript and the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NotAdmitted(pub String);

/// The flow a reply belongs to, asked before the reply shows and when it is finished.
#[async_trait]
pub(crate) trait ReplyGate: Send + Sync {
    /// The chat key (`<platform>:<chat>[:thread:<id>]`) in which the reply's posts must wake
    /// no bot.
    fn quiet_in(&self) -> &ChatKey;

    /// Whether the reply may still be shown; asked before its first post.
    async fn open(&self) -> Result<(), NotAdmitted>;

    /// The turn ended with `text`: take it into the flow, or say why not. Asked once, before
    /// the finished reply is posted.
    async fn admit(&self, text: &str) -> Result<(), NotAdmitted>;
}
