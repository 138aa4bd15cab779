//! Pipeline steps 7 and 8: the guards (`src/guards/`) asked about one event. A human who passed
//! the policy restarts the chat's bot-to-bot chain; a bot's message must pass the bot guards;
//! every sender spends its budget with the bot.

use super::Inbound;
use super::stop::{DropReason, Notice, Step, Stop};
use crate::guards::{BotAuthor, BotMessage, Guards, RateVerdict};
use crate::store::Origin;

/// Heard after step 5, never stopping: a human who passed the policy speaks, so the chat's
/// bot-to-bot chain starts over.
pub(super) fn human_spoke(guards: &Guards, inbound: &Inbound<'_>) {
    if inbound.speaker.origin == Origin::Human {
        guards.bot_messages.human_spoke(&inbound.chat_key);
    }
}

/// Step 7: a bot's message must pass the bot guards.
pub(super) fn bot_message(guards: &Guards, inbound: &Inbound<'_>) -> Step<()> {
    let speaker = &inbound.speaker;
    if speaker.origin != Origin::Bot {
        return Ok(());
    }
    let author = speaker.bot.clone().map_or_else(
        || BotAuthor::Foreign(inbound.event.sender.id.clone()),
        BotAuthor::Ours,
    );
    let checked = guards.bot_messages.check(BotMessage {
        chat: &inbound.chat_key,
        message_id: inbound.event.message_id.as_str(),
        author: &author,
        woken: inbound.bot(),
        author_allowed: inbound.policy.allow_bots.is_match(author.as_str()),
    });
    checked.map_err(|refusal| Stop::dropped(DropReason::BotGuard(refusal)).keep_as_history())
}

/// Step 8: the sender's budget with this bot. Over it, one notice, then silence for the window.
/// A non-admin's `/baton` command passes it too (`admin_step.rs`).
pub(super) fn rate_limit(guards: &Guards, inbound: &Inbound<'_>) -> Step<()> {
    let verdict = guards.inbound.check(inbound.bot(), &inbound.speaker.label);
    let limited = Stop::dropped(DropReason::RateLimited);
    match verdict {
        RateVerdict::Allowed => Ok(()),
        RateVerdict::LimitedNotify { retry_after } => {
            let text = format!(
                "You're sending messages faster than I can answer; I'll read again in {} s.",
                retry_after.as_secs().max(1)
            );
            Err(limited.with_notice(Notice::Now(text)))
        }
        RateVerdict::LimitedQuiet => Err(limited),
    }
}

#[cfg(test)]
mod tests {
    use super::super::stop::Handled;
    use super::super::testing::{inbound, to_bot};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};
    use crate::guards::BotRefusal;

    /// Bots `alpha` and `beta`; `extra` is appended.
    fn config(extra: &str) -> String {
        echo_config(&["alpha", "beta"], extra)
    }

    /// A human's message never meets the bot guards; a bot's, from a bot not allowed in the
    /// chat, is refused, and kept as history for the chat's bots to read.
    #[tokio::test]
    async fn a_bot_not_allowed_here_is_refused_and_its_message_kept_as_history() {
        let gw = parts(&config("")).await;
        let (d, guards) = (&gw.dispatcher, gw.dispatcher.guards());
        let human = inbound(d, to_bot("alpha", 1, "room", "ann", "@alpha hi"));
        assert_eq!(bot_message(guards, &human), Ok(()));
        let bot = inbound(d, to_bot("alpha", 2, "room", "beta", "@alpha hi"));
        let stop = bot_message(guards, &bot).expect_err("beta is not allowed");
        assert_eq!(
            stop.handled,
            Handled::Dropped(DropReason::BotGuard(BotRefusal::NotAllowed))
        );
        assert_eq!(stop.keep, super::super::stop::Keep::AsHistory);
        assert_eq!(stop.notice, None, "a bot is told nothing");
    }

    /// Past `max_bot_reply_chain` bot messages in a row, no bot wakes another until a human
    /// who passed the policy speaks; a bot speaking does not start the chain over.
    #[tokio::test]
    async fn past_the_bot_chain_only_a_human_speaking_lets_bots_wake_bots_again() {
        let allowed = config("\n[limits]\nmax_bot_reply_chain = 1\n").replace(
            "activation = \"mention\"\n",
            "activation = \"mention\"\nallow_bots = [\"beta\"]\n",
        );
        let gw = parts(&allowed).await;
        let (d, guards) = (&gw.dispatcher, gw.dispatcher.guards());
        let from_beta = |n| inbound(d, to_bot("alpha", n, "room", "beta", "@alpha go on"));
        assert_eq!(bot_message(guards, &from_beta(1)), Ok(()));
        let refused = |stop: Stop| match stop.handled {
            Handled::Dropped(DropReason::BotGuard(BotRefusal::ChainLimit { .. })) => true,
            other => panic!("not refused by the chain: {other:?}"),
        };
        assert!(refused(bot_message(guards, &from_beta(2)).unwrap_err()));
        human_spoke(guards, &from_beta(3));
        assert!(
            refused(bot_message(guards, &from_beta(4)).unwrap_err()),
            "a bot is no human"
        );
        human_spoke(guards, &inbound(d, to_bot("alpha", 5, "room", "ann", "ok")));
        assert_eq!(bot_message(guards, &from_beta(6)), Ok(()));
    }

    /// Over the rate limit, a sender is told once when to come back, then stopped without a
    /// word for the rest of the window; another sender's budget is its own.
    #[tokio::test]
    async fn over_the_rate_limit_a_sender_is_told_once_then_not() {
        let gw = parts(&config("\n[limits]\ninbound_per_sender_per_minute = 1\n")).await;
        let (d, guards) = (&gw.dispatcher, gw.dispatcher.guards());
        let from = |n, who| inbound(d, to_bot("alpha", n, "room", who, "@alpha hi"));
        assert_eq!(rate_limit(guards, &from(1, "ann")), Ok(()));
        let told = rate_limit(guards, &from(2, "ann")).unwrap_err();
        assert_eq!(told.handled, Handled::Dropped(DropReason::RateLimited));
        let Some(Notice::Now(text)) = &told.notice else {
            panic!("not told: {told:?}");
        };
        assert!(text.starts_with("You're sending messages faster"), "{text}");
        let quiet = rate_limit(guards, &from(3, "ann")).unwrap_err();
        assert_eq!(quiet.handled, Handled::Dropped(DropReason::RateLimited));
        assert_eq!(quiet.notice, None, "told once");
        assert_eq!(rate_limit(guards, &from(4, "bob")), Ok(()));
    }
}
