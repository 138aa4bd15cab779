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
