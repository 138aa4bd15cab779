//! What became of one event: [`Handled`], and when it stopped before a turn, the
//! [`DropReason`] (counted, logged, told on `/api/events`).

use super::Refusal;
use crate::guards::BotRefusal;
use crate::lanes::QueueFull;

/// What became of one event. Returned to callers that wait (the local HTTP chat) and logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Already handled before (a platform redelivery or a replay).
    Duplicate,
    /// Stopped before any turn.
    Dropped(DropReason),
    /// Not addressed to the bot: kept in the chat's history buffer as context.
    Buffered,
    /// An admin command, answered without a model turn.
    Admin(String),
    /// A human's answer to a bot's question (this escalation id), routed back to the bot.
    Answered(String),
    /// The bot replied; the text as delivered (silent token stripped).
    Replied(String),
    /// The bot chose silence.
    Silent,
    /// The turn or its delivery failed; recorded in the transcript.
    Failed(String),
}

impl Handled {
    /// What became of the event, in a word (a drop with its reason: `dropped:paused`), as the
    /// trace's pipeline span tells it.
    pub fn name(&self) -> String {
        match self {
            Handled::Duplicate => "duplicate".into(),
            Handled::Dropped(reason) => format!("dropped:{}", reason.as_str()),
            Handled::Buffered => "buffered".into(),
            Handled::Admin(_) => "admin".into(),
            Handled::Answered(_) => "answered".into(),
            Handled::Replied(_) => "replied".into(),
            Handled::Silent => "silent".into(),
            Handled::Failed(_) => "failed".into(),
        }
    }
}

/// Why an event stopped before a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// No configured account matches the event.
    UnknownAccount,
    /// The bot's own message.
    OwnMessage,
    /// Another account already answered this admin command.
    AdminHandledElsewhere,
    /// The chat or DM policy refused the sender.
    Policy(Refusal),
    /// A DM sender waiting for pairing approval.
    PairingPending,
    /// The bot is paused in this chat.
    Paused,
    /// A bot-authored message that may not wake this bot.
    BotGuard(BotRefusal),
    /// A line the gateway posted through a bot account (admin answer, notice, error reply).
    GatewayNotice,
    /// The sender is over the inbound rate limit.
    RateLimited,
    /// The bot's lane or session has its maximum of turns waiting.
    Busy(QueueFull),
    /// The text is over [`MAX_TEXT_BYTES`](super::MAX_TEXT_BYTES).
    TooLong,
    /// The gateway is draining for shutdown and takes no new events.
    ShuttingDown,
    /// The store cannot record the event (disk full, read-only): refused rather than answered
    /// without a record.
    StoreFailing,
}

impl DropReason {
    /// The reason's name, as `/api/events` tells it.
    pub fn as_str(&self) -> String {
        match self {
            DropReason::UnknownAccount => "unknown_account".into(),
            DropReason::OwnMessage => "own_message".into(),
            DropReason::AdminHandledElsewhere => "admin_handled_elsewhere".into(),
            DropReason::Policy(refusal) => format!("policy:{}", refusal.as_str()),
            DropReason::PairingPending => "pairing_pending".into(),
            DropReason::Paused => "paused".into(),
            DropReason::BotGuard(refusal) => format!("bot_guard:{}", refusal.as_str()),
            DropReason::GatewayNotice => "gateway_notice".into(),
            DropReason::RateLimited => "rate_limited".into(),
            DropReason::Busy(full) => format!("busy:{}", full.as_str()),
            DropReason::TooLong => "too_long".into(),
            DropReason::ShuttingDown => "shutting_down".into(),
            DropReason::StoreFailing => "store_failing".into(),
        }
    }
}
