//! Pipeline step 6: does this message wake this bot?
//!
//! `mention` wakes a bot only on a *structural* mention: the platform's mention of its user id,
//! or a reply to one of its messages. Plain-text name matching is off, so "I asked snark
//! yesterday" does not summon snark. `always` wakes it on every message, except one that
//! mentions only *other* bots (`ignore_other_mentions`): "@caid fix this" is for caid alone.
//! A direct message is always addressed to the bot.
//!
//! A message that opens with mentions is addressed to those: a bot mentioned only later in it
//! is being talked about, not to. `@snark ask @caid: ...` wakes snark alone (snark then asks
//! caid itself); `can @caid help?` opens with a word, so every mention in it wakes.
//!
//! [`decide`] is the rule, pure; [`wakes`] is the step: the chat's `/baton activation` over the
//! configured one, and a paused bot is not woken. Either way the message is kept as history.

use baton_contract::{ChatKind, InboundEvent, UserId};

use super::Inbound;
use super::stop::{DropReason, Handled, NotWoken, Step, Stop};
use crate::config::{Activation, MentionMode};
use crate::roster::{ChatPolicy, Roster};
use crate::store::Store;

/// Why a bot woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A direct message.
    DirectMessage,
    /// Mentioned by its platform id.
    Mentioned,
    /// A reply to one of its messages.
    RepliedTo,
    /// `@everyone`-style mention where `respond_to_at_all` is on.
    Everyone,
    /// The chat is `always`.
    Always,
}

impl Wake {
    /// As `baton why` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::DirectMessage => "direct message",
            Wake::Mentioned => "mentioned",
            Wake::RepliedTo => "a reply to it",
            Wake::Everyone => "mentions everyone",
            Wake::Always => "activation always",
        }
    }
}

/// Decide whether the bot with platform identity `me` wakes on `event`. `activation` is the
/// chat's effective activation (config or admin override); `is_bot` tells whether a mentioned
/// user id is a bot's.
pub(crate) fn decide(
    event: &InboundEvent,
    me: Option<&UserId>,
    activation: Activation,
    chat: &ChatPolicy,
    is_bot: impl Fn(&UserId) -> bool,
) -> Option<Wake> {
    if event.chat_kind == ChatKind::Dm {
        return Some(Wake::DirectMessage);
    }
    let addressees = addressees(event, chat.mentions);
    if let Some(me) = me {
        if addressees.contains(me) {
            return Some(Wake::Mentioned);
        }
        if event.reply_to_author.as_ref() == Some(me) {
            return Some(Wake::RepliedTo);
        }
    }
    if event.mentions_everyone && chat.respond_to_at_all {
        return Some(Wake::Everyone);
    }
    match activation {
        Activation::Mention => None,
        Activation::Always => {
            let only_other_bots = !addressees.is_empty() && addressees.iter().all(is_bot);
            (!(chat.ignore_other_mentions && only_other_bots)).then_some(Wake::Always)
        }
    }
}

/// Why `event` woke the bot with identity `me` no more than [`decide`] said: it is addressed
/// to other bots only, or not to it.
fn not_woken(
    event: &InboundEvent,
    me: Option<&UserId>,
    chat: &ChatPolicy,
    is_bot: impl Fn(&UserId) -> bool,
) -> NotWoken {
    let addressees = addressees(event, chat.mentions);
    let others = !addressees.is_empty() && addressees.iter().all(|u| Some(u) != me);
    if others && addressees.iter().all(is_bot) {
        NotWoken::OnlyOtherBots
    } else {
        NotWoken::NotMentioned
    }
}

/// The mentions the message is addressed to: those that open it, or all of them when it opens
/// with a word (or the chat says `mentions = "all"`).
fn addressees(event: &InboundEvent, mode: MentionMode) -> &[UserId] {
    match (mode, event.leading_mentions) {
        (MentionMode::All, _) | (_, 0) => &event.mentions,
        (MentionMode::Leading, n) => &event.mentions[..n.min(event.mentions.len())],
    }
}

/// Step 6: whether the message wakes the bot (the chat's `/baton activation`, from `store`,
/// over its configured one), and whether the bot is paused here. A message that does not wake
/// it is kept as history.
pub(super) async fn wakes(store: &Store, roster: &Roster, inbound: &Inbound<'_>) -> Step<Wake> {
    let settings = store
        .chat_settings(&inbound.settings_key)
        .await
        .unwrap_or_default();
    let activation = settings.activation.unwrap_or(inbound.policy.activation);
    let me = inbound.account.adapter.self_id();
    let is_bot = |u: &UserId| roster.bot_of_user(inbound.event.platform, u).is_some();
    let woke = decide(
        &inbound.event,
        me.as_ref(),
        activation,
        &inbound.policy,
        is_bot,
    );
    let Some(wake) = woke else {
        let why = not_woken(&inbound.event, me.as_ref(), &inbound.policy, is_bot);
        return Err(Stop::handled(Handled::Buffered)
            .keep_as_history()
            .not_woken(why));
    };
    if settings.is_paused(inbound.bot()) {
        return Err(Stop::dropped(DropReason::Paused).keep_as_history());
    }
    Ok(wake)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_contract::{Platform, Sender};

    use super::*;

    fn chat() -> ChatPolicy {
        ChatPolicy {
            listed: true,
            activation: Activation::Mention,
            allow_bots: Arc::new(globset::GlobSet::empty()),
            history_limit: 10,
            ignore_other_mentions: true,
            mentions: crate::config::MentionMode::Leading,
            respond_to_at_all: false,
            personas: Arc::default(),
        }
    }

    fn event(mentions: &[&str]) -> InboundEvent {
        let sender = Sender {
            id: "alice".into(),
            name: "Alice".into(),
            is_bot: false,
            is_self: false,
        };
        let mut e = InboundEvent::text_message(
            Platform::Local,
            "snark".into(),
            "room".into(),
            ChatKind::Group,
            sender,
            "m1".into(),
            "text",
        );
        e.mentions = mentions.iter().map(|m| UserId::from(*m)).collect();
        e
    }

    fn bots(id: &UserId) -> bool {
        ["snark", "caid"].contains(&id.as_str())
    }

    #[test]
    fn mention_mode_needs_a_structural_mention_or_reply() {
        let me = UserId::from("snark");
        let d = |e: &InboundEvent| decide(e, Some(&me), Activation::Mention, &chat(), bots);
        assert_eq!(d(&event(&["snark"])), Some(Wake::Mentioned));
        assert_eq!(d(&event(&[])), None);
        let mut text_only = event(&[]);
        text_only.text = "snark, are you there?".into();
        assert_eq!(d(&text_only), None, "name matching in plain text is off");
        let mut reply = event(&[]);
        reply.reply_to_author = Some(me.clone());
        assert_eq!(d(&reply), Some(Wake::RepliedTo));
    }

    #[test]
    fn a_bot_named_after_the_addressees_is_not_woken() {
        let caid = UserId::from("caid");
        let mut ask = event(&["snark", "caid"]);
        ask.text = "@snark ask @caid: write a haiku".into();
        ask.leading_mentions = 1;
        let d = |e: &InboundEvent, a| decide(e, Some(&caid), a, &chat(), bots);
        assert_eq!(d(&ask, Activation::Mention), None);
        assert_eq!(
            d(&ask, Activation::Always),
            None,
            "addressed to another bot only"
        );
        let snark = UserId::from("snark");
        assert_eq!(
            decide(&ask, Some(&snark), Activation::Mention, &chat(), bots),
            Some(Wake::Mentioned)
        );
        let mut both = ask.clone();
        both.leading_mentions = 2;
        assert_eq!(d(&both, Activation::Mention), Some(Wake::Mentioned));
        let mut every = chat();
        every.mentions = MentionMode::All;
        assert_eq!(
            decide(&ask, Some(&caid), Activation::Mention, &every, bots),
            Some(Wake::Mentioned),
            "mentions = \"all\" wakes every mentioned bot"
        );
        let mut in_passing = ask;
        in_passing.leading_mentions = 0;
        assert_eq!(
            d(&in_passing, Activation::Mention),
            Some(Wake::Mentioned),
            "a message opening with a word is for everyone it mentions"
        );
    }

    #[test]
    fn always_mode_ignores_messages_for_other_bots_only() {
        let me = UserId::from("snark");
        let d =
            |e: &InboundEvent, c: &ChatPolicy| decide(e, Some(&me), Activation::Always, c, bots);
        assert_eq!(d(&event(&[]), &chat()), Some(Wake::Always));
        assert_eq!(d(&event(&["caid"]), &chat()), None);
        assert_eq!(d(&event(&["caid", "bob"]), &chat()), Some(Wake::Always));
        assert_eq!(
            d(&event(&["caid", "snark"]), &chat()),
            Some(Wake::Mentioned)
        );
        let mut keen = chat();
        keen.ignore_other_mentions = false;
        assert_eq!(d(&event(&["caid"]), &keen), Some(Wake::Always));
    }

    #[test]
    fn dms_always_wake_and_everyone_only_when_enabled() {
        let me = UserId::from("snark");
        let mut dm = event(&[]);
        dm.chat_kind = ChatKind::Dm;
        assert_eq!(
            decide(&dm, Some(&me), Activation::Mention, &chat(), bots),
            Some(Wake::DirectMessage)
        );
        let mut all = event(&[]);
        all.mentions_everyone = true;
        assert_eq!(
            decide(&all, Some(&me), Activation::Mention, &chat(), bots),
            None
        );
        let mut keen = chat();
        keen.respond_to_at_all = true;
        assert_eq!(
            decide(&all, Some(&me), Activation::Mention, &keen, bots),
            Some(Wake::Everyone)
        );
    }
}
