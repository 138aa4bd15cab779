//! The decision record: what the pipeline made of one event for one bot, and why, built here
//! and nowhere else ([`of`]), from what the steps returned: the [`Stop`] that ended the event,
//! or the woken bot's [`Turned`]. The store keeps it with the write that ends the event's run
//! (`baton why`, `GET /api/why`); being one typed value per event per bot, it is also what a
//! trace's pipeline span is made from.

use super::gateway_line::run_id;
use super::stop::{DropReason, Handled, NotWoken, Step, Stop};
use super::{Inbound, Wake};
use crate::store::{DecisionOutcome, DecisionStep, NewDecision, Said};
use crate::timing::now_ms;

/// What a woken bot's turn came to (steps 9 to 13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turned {
    /// What became of the event.
    pub handled: Handled,
    /// Why the bot woke.
    pub wake: Wake,
    /// How long the turn waited for its lane and session, in ms.
    pub waited_ms: i64,
    /// A used-up budget refused the turn before its model call.
    pub by_budget: bool,
}

/// The decision on `inbound`, from what the steps made of it.
pub(crate) fn of(inbound: &Inbound<'_>, ran: &Step<Turned>) -> NewDecision {
    match ran {
        Ok(turned) => {
            let (outcome, reason) = match &turned.handled {
                Handled::Replied(_) => (DecisionOutcome::Replied, String::new()),
                Handled::Silent => (DecisionOutcome::Silent, String::new()),
                Handled::Failed(why) => (DecisionOutcome::Failed, why.clone()),
                other => (outcome_of(other), String::new()),
            };
            let woke = turned.wake.as_str();
            let reason = if reason.is_empty() {
                woke.to_owned()
            } else {
                format!("{woke}; {reason}")
            };
            let step = if turned.by_budget {
                DecisionStep::Budget
            } else {
                DecisionStep::Turn
            };
            NewDecision {
                session: Some(inbound.session()),
                run_id: Some(run_id(inbound, "in")),
                waited_ms: Some(turned.waited_ms),
                ..decided(inbound, step, outcome, reason)
            }
        }
        Err(stop) => {
            let (step, reason) = stopped(stop);
            decided(inbound, step, outcome_of(&stop.handled), reason)
        }
    }
}

/// The decision on `inbound` should its claim find it received before.
pub(crate) fn duplicate(inbound: &Inbound<'_>) -> NewDecision {
    let now = now_ms();
    decided(
        inbound,
        DecisionStep::Duplicate,
        DecisionOutcome::Duplicate,
        String::new(),
    )
    .duplicate(now)
}

fn decided(
    inbound: &Inbound<'_>,
    step: DecisionStep,
    outcome: DecisionOutcome,
    reason: String,
) -> NewDecision {
    let event = &inbound.event;
    NewDecision {
        ts_ms: now_ms(),
        platform: event.platform.as_str().to_owned(),
        account: inbound.account.id.as_str().to_owned(),
        bot: inbound.bot().as_str().to_owned(),
        chat: inbound.chat_key.as_str().to_owned(),
        message_id: event.message_id.as_str().to_owned(),
        event_id: event.event_id.clone(),
        sender: inbound.speaker.label.clone(),
        step,
        outcome,
        reason,
        session: None,
        run_id: None,
        waited_ms: None,
        said: Said {
            ts_ms: event.timestamp_ms,
            room: inbound.settings_key.as_str().to_owned(),
            author_name: inbound.speaker.name.clone(),
            origin: inbound.speaker.origin,
            text: event.text.clone(),
        },
    }
}

fn outcome_of(handled: &Handled) -> DecisionOutcome {
    match handled {
        Handled::Duplicate => DecisionOutcome::Duplicate,
        Handled::Dropped(_) => DecisionOutcome::Dropped,
        Handled::Buffered => DecisionOutcome::Buffered,
        Handled::Admin(_) => DecisionOutcome::Admin,
        Handled::Answered(_) => DecisionOutcome::Answered,
        Handled::Replied(_) => DecisionOutcome::Replied,
        Handled::Silent => DecisionOutcome::Silent,
        Handled::Failed(_) => DecisionOutcome::Failed,
    }
}

/// The step that stopped the event, and why in words.
fn stopped(stop: &Stop) -> (DecisionStep, String) {
    let reason = match &stop.handled {
        Handled::Buffered => {
            let why = stop.not_woken.unwrap_or(NotWoken::NotMentioned);
            return (DecisionStep::Activation, why.as_str().to_owned());
        }
        Handled::Admin(_) => return (DecisionStep::Admin, "an admin command, answered".into()),
        Handled::Answered(id) => {
            return (
                DecisionStep::Answer,
                format!("an answer to the bot's question {id}"),
            );
        }
        Handled::Dropped(reason) => reason,
        Handled::Duplicate => return (DecisionStep::Duplicate, String::new()),
        Handled::Replied(_) | Handled::Silent | Handled::Failed(_) => {
            return (DecisionStep::Turn, String::new());
        }
    };
    match reason {
        DropReason::OwnMessage => (DecisionStep::OwnMessage, "the bot's own message".into()),
        DropReason::GatewayNotice => (
            DecisionStep::OwnMessage,
            "a line the gateway posted through a bot".into(),
        ),
        DropReason::TooLong => (DecisionStep::Size, "over 100 kB".into()),
        DropReason::AdminHandledElsewhere => (
            DecisionStep::Admin,
            "an admin command another account answered".into(),
        ),
        DropReason::Policy(refusal) => (DecisionStep::Policy, refusal.as_str().into()),
        DropReason::PairingPending => (
            DecisionStep::Policy,
            "the sender waits for pairing approval".into(),
        ),
        DropReason::Paused => (DecisionStep::Activation, "paused".into()),
        DropReason::BotGuard(refusal) => (DecisionStep::BotGuard, refusal.as_str().into()),
        DropReason::RateLimited => (
            DecisionStep::Rate,
            "the sender is over the inbound rate limit".into(),
        ),
        DropReason::Busy(full) => (
            DecisionStep::Lane,
            format!("too many turns waiting: {}", full.as_str()),
        ),
        DropReason::UnknownAccount | DropReason::ShuttingDown | DropReason::StoreFailing => {
            (DecisionStep::Intake, reason.as_str())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{inbound, to_bot};
    use super::*;
    use crate::dispatcher::Refusal;
    use crate::gateway::testing::{echo_config, parts};
    use crate::guards::BotRefusal;
    use crate::lanes::QueueFull;

    fn turned(handled: Handled, by_budget: bool) -> Step<Turned> {
        Ok(Turned {
            handled,
            wake: Wake::RepliedTo,
            waited_ms: 12,
            by_budget,
        })
    }

    /// A turn is decided at the turn step, in the bot's session and run, with why the bot woke
    /// and, when it failed, why it failed too.
    #[tokio::test]
    async fn a_turn_is_decided_with_why_it_woke_and_why_it_failed() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let inbound = inbound(&gw.dispatcher, to_bot("alpha", 1, "room", "ann", "hi"));
        let replied = of(&inbound, &turned(Handled::Replied("hi".into()), false));
        assert_eq!(
            (replied.step, replied.outcome, replied.reason.as_str()),
            (
                DecisionStep::Turn,
                DecisionOutcome::Replied,
                "a reply to it"
            )
        );
        assert_eq!(replied.session, Some(inbound.session()));
        assert_eq!(replied.run_id.as_deref(), Some("in:local:alpha:m1"));
        assert_eq!(replied.waited_ms, Some(12));
        let failed = of(
            &inbound,
            &turned(Handled::Failed("timed out".into()), false),
        );
        assert_eq!(failed.outcome, DecisionOutcome::Failed);
        assert_eq!(failed.reason, "a reply to it; timed out");
    }

    /// A turn a used-up budget refused before its model call is decided at the budget step.
    #[tokio::test]
    async fn a_turn_the_budget_refused_is_decided_at_the_budget_step() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let inbound = inbound(&gw.dispatcher, to_bot("alpha", 1, "room", "ann", "hi"));
        let refused = of(&inbound, &turned(Handled::Failed("budget".into()), true));
        assert_eq!(refused.step, DecisionStep::Budget);
        assert_eq!(refused.outcome, DecisionOutcome::Failed);
    }

    /// Each stop is decided at the step that made it, with no session or run (no turn ran).
    #[tokio::test]
    async fn each_stop_is_decided_at_the_step_that_made_it() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let inbound = inbound(&gw.dispatcher, to_bot("alpha", 1, "room", "ann", "hi"));
        let cases = [
            (DropReason::OwnMessage, DecisionStep::OwnMessage),
            (DropReason::GatewayNotice, DecisionStep::OwnMessage),
            (DropReason::TooLong, DecisionStep::Size),
            (DropReason::AdminHandledElsewhere, DecisionStep::Admin),
            (
                DropReason::Policy(Refusal::GroupNotListed),
                DecisionStep::Policy,
            ),
            (DropReason::PairingPending, DecisionStep::Policy),
            (DropReason::Paused, DecisionStep::Activation),
            (
                DropReason::BotGuard(BotRefusal::NotAllowed),
                DecisionStep::BotGuard,
            ),
            (DropReason::RateLimited, DecisionStep::Rate),
            (
                DropReason::Busy(QueueFull::Session { max: 1 }),
                DecisionStep::Lane,
            ),
            (DropReason::ShuttingDown, DecisionStep::Intake),
        ];
        for (reason, step) in cases {
            let decided = of(&inbound, &Err(Stop::dropped(reason.clone())));
            assert_eq!(decided.step, step, "{reason:?}");
            assert_eq!(decided.outcome, DecisionOutcome::Dropped, "{reason:?}");
            assert!(!decided.reason.is_empty(), "{reason:?} says why");
            assert_eq!((decided.session, decided.run_id), (None, None));
        }
        let policy = of(
            &inbound,
            &Err(Stop::dropped(DropReason::Policy(Refusal::DmsDisabled))),
        );
        assert_eq!(policy.reason, "dms_disabled");
        let answered = of(
            &inbound,
            &Err(Stop::handled(Handled::Answered("q-1".into()))),
        );
        assert_eq!(
            (answered.step, answered.outcome, answered.reason.as_str()),
            (
                DecisionStep::Answer,
                DecisionOutcome::Answered,
                "an answer to the bot's question q-1"
            )
        );
    }

    /// A message that woke nobody is decided at activation with why: not mentioned unless
    /// activation said otherwise.
    #[tokio::test]
    async fn a_message_that_woke_nobody_says_why() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let inbound = inbound(&gw.dispatcher, to_bot("alpha", 1, "room", "ann", "hi"));
        let kept = Stop::handled(Handled::Buffered).keep_as_history();
        let unsaid = of(&inbound, &Err(kept.clone()));
        assert_eq!(
            (unsaid.step, unsaid.outcome, unsaid.reason.as_str()),
            (
                DecisionStep::Activation,
                DecisionOutcome::Buffered,
                "not mentioned"
            )
        );
        let others = of(&inbound, &Err(kept.not_woken(NotWoken::OnlyOtherBots)));
        assert_eq!(others.reason, "mentions only other bots");
    }

    /// The decision kept should the claim find the event received before: a duplicate, with
    /// what was said, and no turn.
    #[tokio::test]
    async fn a_redelivery_is_decided_as_a_duplicate_of_what_was_said() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let inbound = inbound(&gw.dispatcher, to_bot("alpha", 1, "room", "ann", "hi"));
        let again = duplicate(&inbound);
        assert_eq!(
            (again.step, again.outcome),
            (DecisionStep::Duplicate, DecisionOutcome::Duplicate)
        );
        assert_eq!(
            (again.said.text.as_str(), again.sender.as_str()),
            ("hi", "ann")
        );
        assert_eq!(again.chat, "local:room");
        assert!(
            again.reason.starts_with("received before"),
            "{}",
            again.reason
        );
    }
}
