//! How an event ends, in words only: what became of it ([`Handled`]), why it stopped before a
//! turn ([`DropReason`]), and how a step says so: every step returns a [`Step`], and a [`Stop`]
//! says what became of the event, whether the sender is owed a line ([`Notice`]), and whether
//! the message is kept as history. Every step stands on this file and it stands on none of
//! them; performing a stop (`handled.rs`) stands above them all.

use crate::guards::BotRefusal;
use crate::lanes::QueueFull;

/// What one step returns: what the next steps need, or why the event goes no further.
pub(crate) type Step<T> = Result<T, Stop>;

/// Why an event goes no further, and what stopping it owes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stop {
    /// What became of the event.
    pub handled: Handled,
    /// A line for the sender.
    pub notice: Option<Notice>,
    /// The message stays in the chat's history buffer as context for the chat's bots.
    pub keep: Keep,
    /// Why it woke no bot, when activation stopped it so (`decision.rs`).
    pub not_woken: Option<NotWoken>,
}

/// Why a message woke no bot (step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotWoken {
    /// Nobody it is addressed to is this bot.
    NotMentioned,
    /// It is addressed to other bots only.
    OnlyOtherBots,
}

impl NotWoken {
    /// As `baton why` says it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NotWoken::NotMentioned => "not mentioned",
            NotWoken::OnlyOtherBots => "mentions only other bots",
        }
    }
}

/// Whether the steps act on what they find, or only say whether they would: chatter's
/// question at intake (`chatter.rs`) runs the same steps as the pipeline, asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Act: run a command, write a pairing code, route an answer back.
    Act,
    /// Only ask: a step that would act stops instead, doing nothing.
    Ask,
}

/// Whether a stopped message is kept as history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Kept: the bots see it as context next time they are woken.
    AsHistory,
    /// Not kept.
    Nothing,
}

/// A line the gateway owes the sender of a stopped event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Posted now.
    Now(String),
    /// Posted at most once per sender per account every 10 minutes (policy refusals, pairing).
    OncePerSender(String),
    /// Posted at most once per chat a minute (the turn's queue is full: `busy.rs`).
    OncePerChat(String),
}

impl Stop {
    /// The event was dealt with (an admin command, an answer) or is history.
    pub(crate) fn handled(handled: Handled) -> Stop {
        Stop {
            handled,
            notice: None,
            keep: Keep::Nothing,
            not_woken: None,
        }
    }

    /// The event is dropped for `reason`.
    pub(crate) fn dropped(reason: DropReason) -> Stop {
        Stop::handled(Handled::Dropped(reason))
    }

    /// The sender is told `notice`.
    pub(crate) fn with_notice(self, notice: Notice) -> Stop {
        Stop {
            notice: Some(notice),
            ..self
        }
    }

    /// The message is kept in the chat's history buffer.
    pub(crate) fn keep_as_history(self) -> Stop {
        Stop {
            keep: Keep::AsHistory,
            ..self
        }
    }

    /// Activation woke nobody, for `why`.
    pub(crate) fn not_woken(self, why: NotWoken) -> Stop {
        Stop {
            not_woken: Some(why),
            ..self
        }
    }

    /// Chatter: woke nobody, kept as history, owes nothing (`chatter.rs`).
    pub(crate) fn is_chatter(&self) -> bool {
        self.handled == Handled::Buffered && self.keep == Keep::AsHistory && self.notice.is_none()
    }
}

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
    /// The text is over [`MAX_TEXT_BYTES`](crate::field_bound::MAX_TEXT_BYTES).
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

/// Why step 5, the chat or DM policy (`policy.rs`), refused a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `group_policy = "allowlist"` and the chat has no `[[chats]]` entry.
    GroupNotListed,
    /// `group_policy = "disabled"`.
    GroupsDisabled,
    /// `dm_policy = "disabled"`.
    DmsDisabled,
    /// `dm_policy = "allowlist"` and the sender is not in `dm_allow`.
    DmNotAllowed,
}

impl Refusal {
    /// Short name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::GroupNotListed => "group_not_listed",
            Refusal::GroupsDisabled => "groups_disabled",
            Refusal::DmsDisabled => "dms_disabled",
            Refusal::DmNotAllowed => "dm_not_allowed",
        }
    }

    /// What a refused DM sender is told. Groups get silence.
    pub fn notice(self) -> &'static str {
        match self {
            Refusal::DmsDisabled => "I don't take direct messages here.",
            _ => "You're not on the list of people I take direct messages from; ask an admin.",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chatter is a stop that woke nobody, keeps the message and owes nothing: a stop that owes
    /// a line, keeps nothing, or is anything but buffered is not chatter.
    #[test]
    fn a_stop_is_chatter_only_when_buffered_kept_and_owing_nothing() {
        let kept = Stop::handled(Handled::Buffered).keep_as_history();
        assert!(kept.is_chatter());
        assert!(kept.clone().not_woken(NotWoken::OnlyOtherBots).is_chatter());
        assert!(!Stop::handled(Handled::Buffered).is_chatter(), "not kept");
        let told = kept.with_notice(Notice::Now("hi".into()));
        assert!(!told.is_chatter(), "owes a line");
        let refused = Stop::dropped(DropReason::BotGuard(BotRefusal::NotAllowed));
        assert!(!refused.keep_as_history().is_chatter(), "dropped");
    }

    /// Each builder sets what it names and keeps the rest: a drop owes nothing and keeps
    /// nothing until told otherwise.
    #[test]
    fn a_stop_owes_only_what_its_builders_add() {
        let dropped = Stop::dropped(DropReason::TooLong);
        assert_eq!(
            (&dropped.notice, dropped.keep, dropped.not_woken),
            (&None, Keep::Nothing, None)
        );
        let built = dropped
            .with_notice(Notice::OncePerSender("no".into()))
            .keep_as_history()
            .not_woken(NotWoken::NotMentioned);
        assert_eq!(built.handled, Handled::Dropped(DropReason::TooLong));
        assert_eq!(built.notice, Some(Notice::OncePerSender("no".into())));
        assert_eq!(built.keep, Keep::AsHistory);
        assert_eq!(built.not_woken, Some(NotWoken::NotMentioned));
    }

    /// A drop is named with its reason, and a reason with the refusal inside it, as the trace
    /// and `/api/events` tell them.
    #[test]
    fn a_drop_is_named_with_its_reason_and_the_refusal_inside_it() {
        assert_eq!(
            Handled::Dropped(DropReason::Paused).name(),
            "dropped:paused"
        );
        assert_eq!(Handled::Answered("q-1".into()).name(), "answered");
        let refused = DropReason::Policy(Refusal::DmNotAllowed);
        assert_eq!(refused.as_str(), "policy:dm_not_allowed");
        let guarded = DropReason::BotGuard(BotRefusal::ChainLimit {
            position: 4,
            max: 3,
        });
        assert_eq!(guarded.as_str(), "bot_guard:bot_reply_chain");
        let busy = DropReason::Busy(QueueFull::Session { max: 1 });
        assert_eq!(
            Handled::Dropped(busy).name(),
            "dropped:busy:session_queue_full"
        );
    }

    /// A DM sender refused because DMs are off is told so; one refused by the allow-list is
    /// told to ask an admin.
    #[test]
    fn a_refused_dm_sender_is_told_why() {
        assert_eq!(
            Refusal::DmsDisabled.notice(),
            "I don't take direct messages here."
        );
        assert!(Refusal::DmNotAllowed.notice().contains("ask an admin"));
    }
}
