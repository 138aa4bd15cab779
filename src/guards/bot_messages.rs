//! Pipeline step 7: when may another bot's message wake a bot?
//!
//! Three rules, checked in this order, so that two bots can never ping-pong forever in a chat:
//! 1. the author must be in the chat's `allow_bots`;
//! 2. the chat's bot reply chain must be short: once `max_bot_reply_chain` bot messages have
//!    followed each other with no human in between, bot messages wake nobody until a human speaks;
//! 3. the pair (author -> woken bot) has a budget of `bot_pair_events_per_minute` per chat; a
//!    pair that spends it is cooled down for `bot_pair_cooldown_seconds`.
//!
//! Every bot account sees the same message, so the chain counts distinct message ids: the
//! verdict for one message is the same whichever bot asks first.
//!
//! The chains are bounded: a chain stops counting once it is past the limit (its verdict
//! cannot change until a human speaks), and at most [`MAX_CHAINS`] chats keep one, the chat
//! whose bots spoke least recently forgetting its chain first.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use baton_contract::{ChatKey, UserId};
use governor::clock::{Clock, DefaultClock, Reference};
use hashlink::LinkedHashMap;

use super::limiter::{KeyedLimiter, later};
use crate::bot_id::BotId;
use crate::config::LimitsConfig;

/// Why a bot's message did not wake a bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BotRefusal {
    /// The author is not in this chat's `allow_bots`.
    NotAllowed,
    /// Too many bot messages in a row; a human must speak first.
    ChainLimit {
        /// Position of this message in the chain of bot messages.
        position: u32,
        /// `max_bot_reply_chain`.
        max: u32,
    },
    /// The pair spent its budget and is cooling down.
    PairCooldown {
        /// Time left.
        retry_after: Duration,
    },
}

impl BotRefusal {
    /// Short name for logs, metrics and `/baton limits`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BotRefusal::NotAllowed => "bot_not_allowed",
            BotRefusal::ChainLimit { .. } => "bot_reply_chain",
            BotRefusal::PairCooldown { .. } => "bot_pair_budget",
        }
    }
}

/// The bot that wrote a message: one of baton's, or one baton does not run, known only by its
/// platform id. Kept apart so that a foreign bot whose platform id happens to spell one of our
/// bots' names never shares that bot's budgets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BotAuthor {
    /// A bot of this gateway.
    Ours(BotId),
    /// Another bot in the chat.
    Foreign(UserId),
}

impl BotAuthor {
    /// The name `allow_bots` matches: the bot's name, or the foreign bot's platform id.
    pub fn as_str(&self) -> &str {
        match self {
            BotAuthor::Ours(bot) => bot.as_str(),
            BotAuthor::Foreign(user) => user.as_str(),
        }
    }
}

/// One bot-authored message asking to wake one bot.
#[derive(Debug, Clone, Copy)]
pub struct BotMessage<'a> {
    /// The chat (and thread) key.
    pub chat: &'a ChatKey,
    /// The platform message id (the chain counts each message once).
    pub message_id: &'a str,
    /// The author bot.
    pub author: &'a BotAuthor,
    /// The bot that would wake.
    pub woken: &'a BotId,
    /// Whether the chat's `allow_bots` lets `author` in.
    pub author_allowed: bool,
}

/// How many chats keep a bot reply chain.
pub(crate) const MAX_CHAINS: usize = 4096;

#[derive(Default)]
struct Chain {
    counted: HashSet<String>,
}

type PairKey = (ChatKey, BotAuthor, BotId);

/// The guard. Shared by every account's pipeline.
pub struct BotMessageGuard<C: Clock = DefaultClock> {
    pairs: KeyedLimiter<PairKey, C>,
    cooldowns: Mutex<HashMap<PairKey, C::Instant>>,
    cooldown: Duration,
    max_chain: u32,
    /// Ordered by the last bot message, oldest first.
    chains: Mutex<LinkedHashMap<ChatKey, Chain>>,
}

impl<C: Clock + Clone> BotMessageGuard<C> {
    /// A guard with the budgets in `[limits]`.
    pub fn new(limits: &LimitsConfig, clock: C) -> Self {
        Self {
            pairs: KeyedLimiter::per_minute(limits.bot_pair_events_per_minute, clock),
            cooldowns: Mutex::new(HashMap::new()),
            cooldown: Duration::from_secs(limits.bot_pair_cooldown_seconds),
            max_chain: limits.max_bot_reply_chain,
            chains: Mutex::new(LinkedHashMap::new()),
        }
    }

    /// A human spoke in `chat`: the bot reply chain starts again.
    pub fn human_spoke(&self, chat: &ChatKey) {
        self.chains.lock().expect("chain map poisoned").remove(chat);
    }

    /// May this bot message wake `message.woken`? Spends the pair budget only when it may.
    pub fn check(&self, message: BotMessage<'_>) -> Result<(), BotRefusal> {
        if !message.author_allowed {
            return Err(BotRefusal::NotAllowed);
        }
        let position = self.chain_position(message.chat, message.message_id);
        if position > self.max_chain {
            return Err(BotRefusal::ChainLimit {
                position,
                max: self.max_chain,
            });
        }
        self.spend_pair_budget(message)
    }

    /// Where this message stands in the chat's current chain of bot messages (1-based).
    fn chain_position(&self, chat: &ChatKey, message_id: &str) -> u32 {
        let mut chains = self.chains.lock().expect("chain map poisoned");
        let mut chain = chains.remove(chat).unwrap_or_default();
        // Past the limit the verdict stays "refused" until a human speaks: stop counting.
        let full = chain.counted.len() > self.max_chain as usize;
        if !full && !chain.counted.contains(message_id) {
            chain.counted.insert(message_id.to_owned());
        }
        let position = u32::try_from(chain.counted.len()).unwrap_or(u32::MAX);
        chains.insert(chat.clone(), chain);
        while chains.len() > MAX_CHAINS {
            chains.pop_front();
        }
        position
    }

    fn spend_pair_budget(&self, message: BotMessage<'_>) -> Result<(), BotRefusal> {
        let key = (
            message.chat.clone(),
            message.author.clone(),
            message.woken.clone(),
        );
        let now = self.pairs.now();
        let mut cooldowns = self.cooldowns.lock().expect("cooldown map poisoned");
        if let Some(&until) = cooldowns.get(&key) {
            if now < until {
                return Err(BotRefusal::PairCooldown {
                    retry_after: until.duration_since(now).into(),
                });
            }
            cooldowns.remove(&key);
        }
        if self.pairs.check(&key).is_err() {
            cooldowns.insert(key, later(now, self.cooldown));
            return Err(BotRefusal::PairCooldown {
                retry_after: self.cooldown,
            });
        }
        Ok(())
    }

    /// Drop state that no longer matters (full budgets, finished cooldowns). Called on a timer.
    pub fn retain_recent(&self) {
        self.pairs.retain_recent();
        let now = self.pairs.now();
        self.cooldowns
            .lock()
            .expect("cooldown map poisoned")
            .retain(|_, until| *until > now);
    }

    /// How many chats keep a chain.
    pub fn chains(&self) -> usize {
        self.chains.lock().expect("chain map poisoned").len()
    }

    /// The chats with a running bot chain and its length, for `/baton limits`.
    pub fn chain_length(&self, chat: &ChatKey) -> u32 {
        let chains = self.chains.lock().expect("chain map poisoned");
        chains
            .get(chat)
            .map_or(0, |c| u32::try_from(c.counted.len()).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn guard(clock: &FakeRelativeClock) -> BotMessageGuard<FakeRelativeClock> {
        let limits = LimitsConfig {
            bot_pair_events_per_minute: 2,
            bot_pair_cooldown_seconds: 60,
            max_bot_reply_chain: 3,
            ..LimitsConfig::default()
        };
        BotMessageGuard::new(&limits, clock.clone())
    }

    /// The local chat `chat`.
    fn local(chat: &str) -> ChatKey {
        ChatKey::new(baton_contract::Platform::Local, &chat.into(), None)
    }

    static ROOM: std::sync::LazyLock<ChatKey> = std::sync::LazyLock::new(|| local("room"));

    /// The bots `a`, `b` and `c` (authors are ours, as in a gateway of three bots).
    static BOTS: std::sync::LazyLock<[(BotAuthor, BotId); 3]> = std::sync::LazyLock::new(|| {
        ["a", "b", "c"].map(|name| {
            let bot: BotId = name.parse().unwrap();
            (BotAuthor::Ours(bot.clone()), bot)
        })
    });

    fn bot(name: &str) -> &'static (BotAuthor, BotId) {
        BOTS.iter()
            .find(|(_, b)| b == name)
            .expect("one of a, b, c")
    }

    fn msg<'a>(id: &'a str, author: &str, woken: &str) -> BotMessage<'a> {
        BotMessage {
            chat: &ROOM,
            message_id: id,
            author: &bot(author).0,
            woken: &bot(woken).1,
            author_allowed: true,
        }
    }

    #[test]
    fn a_bot_not_in_allow_bots_wakes_nobody() {
        let clock = FakeRelativeClock::default();
        let g = guard(&clock);
        let m = BotMessage {
            author_allowed: false,
            ..msg("m1", "a", "b")
        };
        assert_eq!(g.check(m), Err(BotRefusal::NotAllowed));
    }

    #[test]
    fn chain_stops_at_the_limit_until_a_human_speaks() {
        let clock = FakeRelativeClock::default();
        let g = guard(&clock);
        // Budget per pair is 2/min, so alternate pairs to test only the chain.
        assert!(g.check(msg("m1", "a", "b")).is_ok());
        assert!(g.check(msg("m2", "b", "a")).is_ok());
        clock.advance(Duration::from_secs(120));
        assert!(g.check(msg("m3", "a", "b")).is_ok());
        assert_eq!(
            g.check(msg("m4", "b", "a")),
            Err(BotRefusal::ChainLimit {
                position: 4,
                max: 3
            })
        );
        g.human_spoke(&ROOM);
        assert!(g.check(msg("m5", "b", "a")).is_ok());
    }

    #[test]
    fn the_same_message_counts_once_for_every_bot_it_reaches() {
        let clock = FakeRelativeClock::default();
        let g = guard(&clock);
        assert!(g.check(msg("m1", "a", "b")).is_ok());
        assert!(g.check(msg("m1", "a", "c")).is_ok());
        assert_eq!(g.chain_length(&ROOM), 1);
    }

    #[test]
    fn the_chain_map_stays_bounded_however_many_chats_and_messages() {
        let clock = FakeRelativeClock::default();
        let g = guard(&clock);
        for n in 0..MAX_CHAINS + 100 {
            let chat = local(&format!("room{n}"));
            let m = BotMessage {
                chat: &chat,
                ..msg("m1", "a", "b")
            };
            let _ = g.check(m);
        }
        assert_eq!(g.chains(), MAX_CHAINS);
        assert_eq!(
            g.chain_length(&local("room0")),
            0,
            "the oldest chat forgot its chain"
        );
        for n in 0..1000 {
            let _ = g.check(msg(&format!("m{n}"), "a", "b"));
        }
        assert_eq!(
            g.chain_length(&ROOM),
            4,
            "a chain stops counting past the limit"
        );
        assert!(g.check(msg("again", "b", "a")).is_err(), "still refused");
    }

    #[test]
    fn a_foreign_bot_spelled_like_ours_has_a_budget_of_its_own() {
        let clock = FakeRelativeClock::default();
        let g = guard(&clock);
        for id in ["m1", "m2"] {
            assert!(g.check(msg(id, "a", "b")).is_ok());
            g.human_spoke(&ROOM);
        }
        let foreign = BotAuthor::Foreign(UserId::from("a"));
        let m = BotMessage {
            author: &foreign,
            ..msg("m3", "a", "b")
        };
        assert_eq!(g.check(m), Ok(()), "not our bot `a`'s spent budget");
    }

    #[test]
    fn pair_budget_then_cooldown() {
        let clock = FakeRelativeClock::default();
        let g = guard(&clock);
        for id in ["m1", "m2"] {
            assert!(g.check(msg(id, "a", "b")).is_ok());
            g.human_spoke(&ROOM);
        }
        assert!(matches!(
            g.check(msg("m3", "a", "b")),
            Err(BotRefusal::PairCooldown { .. })
        ));
        g.human_spoke(&ROOM);
        assert!(
            g.check(msg("m4", "a", "c")).is_ok(),
            "other pairs are unaffected"
        );
        clock.advance(Duration::from_secs(59));
        assert!(
            g.check(msg("m5", "a", "b")).is_err(),
            "cooldown ended early"
        );
        clock.advance(Duration::from_secs(2));
        assert!(g.check(msg("m6", "a", "b")).is_ok());
    }
}
