//! The `sessions_send` guards: who may hand whom a message, how often,
//! and how deep a chain of sends may go, so bots talking to bots can never start a storm.
//!
//! Checked in two stages. [`SendGuard::check_rules`] is free: it spends no budget, so a retry of
//! an earlier send (answered from the delivery record) is still checked against the rules but
//! never charged twice. [`SendGuard::charge`] spends the per-pair and per-sender budgets
//! (governor keyed limiters) and the fan-out window, and runs only for a send that will start a
//! new run.
//!
//! The fan-out rule counts *distinct* targets in a sliding window. A token bucket cannot say "the
//! 6th different target within 5 s", so it is a small window per sender, kept on the same
//! governor clock as the limiters (tests drive all of them with one fake clock).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use globset::GlobSet;
use governor::clock::{Clock, DefaultClock, Reference};

use super::limiter::KeyedLimiter;
use crate::bot_id::BotId;
use crate::config::{AgentToAgentConfig, LimitsConfig};

/// Why a send was refused. Each is returned to the caller as a structured tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendRefusal {
    /// `[agent_to_agent] enabled = false`.
    Disabled,
    /// A bot sending to itself.
    SelfSend,
    /// The sender or the target is not in `[agent_to_agent] allow`.
    NotAllowed,
    /// The turn was caused by the target's own send: its answer is the reply.
    PassiveReply,
    /// The chain of sends would hold more bots than `max_depth`.
    TooDeep,
    /// `send_per_pair_per_minute` spent for this sender and target.
    PairRate,
    /// `send_per_sender_per_minute` spent for this sender.
    SenderRate,
    /// `fan_out_targets` distinct targets already reached within the window.
    FanOut,
}

impl SendRefusal {
    /// Every reason, for metrics.
    pub const ALL: [SendRefusal; 8] = [
        SendRefusal::Disabled,
        SendRefusal::SelfSend,
        SendRefusal::NotAllowed,
        SendRefusal::PassiveReply,
        SendRefusal::TooDeep,
        SendRefusal::PairRate,
        SendRefusal::SenderRate,
        SendRefusal::FanOut,
    ];

    /// The reason as returned in tool results, stored and counted.
    pub fn as_str(self) -> &'static str {
        match self {
            SendRefusal::Disabled => "disabled",
            SendRefusal::SelfSend => "self-send",
            SendRefusal::NotAllowed => "not-allowed",
            SendRefusal::PassiveReply => "passive-reply",
            SendRefusal::TooDeep => "max-depth",
            SendRefusal::PairRate => "pair-rate",
            SendRefusal::SenderRate => "sender-rate",
            SendRefusal::FanOut => "fan-out",
        }
    }

    /// What the calling model is told, so it stops instead of retrying.
    pub fn explain(self) -> &'static str {
        match self {
            SendRefusal::Disabled => "Bot-to-bot messaging is turned off in this gateway.",
            SendRefusal::SelfSend => "You cannot send a message to yourself.",
            SendRefusal::NotAllowed => {
                "This pair of bots may not message each other ([agent_to_agent] allow)."
            }
            SendRefusal::PassiveReply => {
                "You are answering this bot's own message: reply in your answer instead of \
                 sending it a new one."
            }
            SendRefusal::TooDeep => {
                "This chain of bots handing work to each other is already as deep as allowed; \
                 answer with what you have."
            }
            SendRefusal::PairRate => {
                "You have sent this bot too many messages in the last minute; wait before \
                 sending again."
            }
            SendRefusal::SenderRate => {
                "You have sent too many bot-to-bot messages in the last minute; wait before \
                 sending again."
            }
            SendRefusal::FanOut => {
                "You have messaged too many different bots in the last few seconds; wait, or \
                 work with the answers you have."
            }
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One send, as the guards see it.
#[derive(Debug, Clone, Copy)]
pub struct SendAttempt<'a> {
    /// The sending bot.
    pub sender: &'a BotId,
    /// The target bot.
    pub target: &'a BotId,
    /// Bots in the chain including the target: the caller's depth + 1.
    pub depth: u32,
    /// The bot whose send caused the sender's current turn, if any.
    pub passive_to: Option<&'a BotId>,
    /// An external A2A agent speaks to the target through the target's own sender session
    /// (`sender` is the target): not a self-send.
    pub from_outside: bool,
}

/// The guard. One per gateway, shared by every turn and MCP connection.
pub struct SendGuard<C: Clock = DefaultClock> {
    enabled: bool,
    allow: GlobSet,
    max_depth: u32,
    pairs: KeyedLimiter<(BotId, BotId), C>,
    senders: KeyedLimiter<BotId, C>,
    fan_out: FanOut<C>,
    refused: [AtomicU64; SendRefusal::ALL.len()],
}

impl<C: Clock + Clone> SendGuard<C> {
    /// The guard for `limits` and `a2a`, on `clock`. `allow` is `a2a.allow` compiled.
    pub fn new(limits: &LimitsConfig, a2a: &AgentToAgentConfig, allow: GlobSet, clock: C) -> Self {
        Self {
            enabled: a2a.enabled,
            allow,
            max_depth: limits.max_depth,
            pairs: KeyedLimiter::per_minute(limits.send_per_pair_per_minute, clock.clone()),
            senders: KeyedLimiter::per_minute(limits.send_per_sender_per_minute, clock.clone()),
            fan_out: FanOut {
                targets: limits.fan_out_targets.max(1) as usize,
                window: Duration::from_secs(limits.fan_out_window_seconds),
                clock,
                recent: Mutex::new(HashMap::new()),
            },
            refused: Default::default(),
        }
    }

    /// The rules that cost nothing: on/off, self-send, the allow list, passive reply, depth.
    pub fn check_rules(&self, attempt: &SendAttempt<'_>) -> Result<(), SendRefusal> {
        let verdict = if !self.enabled {
            Err(SendRefusal::Disabled)
        } else if attempt.sender == attempt.target && !attempt.from_outside {
            Err(SendRefusal::SelfSend)
        } else if !(self.allow.is_match(attempt.sender.as_str())
            && self.allow.is_match(attempt.target.as_str()))
        {
            Err(SendRefusal::NotAllowed)
        } else if attempt.passive_to == Some(attempt.target) {
            Err(SendRefusal::PassiveReply)
        } else if attempt.depth > self.max_depth {
            Err(SendRefusal::TooDeep)
        } else {
            Ok(())
        };
        verdict.inspect_err(|r| self.count(*r))
    }

    /// Spend the budgets of a send that will start a new run: fan-out first (it spends nothing
    /// when it refuses), then the sender's and the pair's minute budgets.
    pub fn charge(&self, sender: &BotId, target: &BotId) -> Result<(), SendRefusal> {
        let verdict = self.charge_budgets(sender, target);
        verdict.inspect_err(|r| self.count(*r))
    }

    fn charge_budgets(&self, sender: &BotId, target: &BotId) -> Result<(), SendRefusal> {
        self.fan_out.admit(sender, target)?;
        self.senders
            .check(sender)
            .map_err(|_| SendRefusal::SenderRate)?;
        self.pairs
            .check(&(sender.clone(), target.clone()))
            .map_err(|_| SendRefusal::PairRate)
    }

    /// Refusals since start, per reason (for `/metrics` and `/baton limits`).
    pub fn refusals(&self) -> Vec<(SendRefusal, u64)> {
        SendRefusal::ALL
            .into_iter()
            .map(|r| (r, self.refused[r.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Forget idle keys and expired fan-out windows.
    pub fn retain_recent(&self) {
        self.pairs.retain_recent();
        self.senders.retain_recent();
        self.fan_out.retain_recent();
    }

    fn count(&self, refusal: SendRefusal) {
        self.refused[refusal.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// The targets one sender reached recently, with when each was last reached.
type Reached<I> = VecDeque<(BotId, I)>;

/// Distinct targets per sender within a sliding window.
struct FanOut<C: Clock> {
    targets: usize,
    window: Duration,
    clock: C,
    recent: Mutex<HashMap<BotId, Reached<C::Instant>>>,
}

impl<C: Clock> FanOut<C> {
    /// Admit `target` for `sender`: a target already reached within the window is free; a new
    /// one is refused when the window already holds `targets` distinct ones.
    fn admit(&self, sender: &BotId, target: &BotId) -> Result<(), SendRefusal> {
        let now = self.clock.now();
        let mut recent = self.recent.lock().expect("fan-out map poisoned");
        let seen = recent.entry(sender.clone()).or_default();
        self.expire(seen, now);
        if let Some(slot) = seen.iter_mut().find(|(t, _)| t == target) {
            slot.1 = now;
            return Ok(());
        }
        if seen.len() >= self.targets {
            return Err(SendRefusal::FanOut);
        }
        seen.push_back((target.clone(), now));
        Ok(())
    }

    fn expire(&self, seen: &mut Reached<C::Instant>, now: C::Instant) {
        seen.retain(|(_, at)| Duration::from(now.duration_since(*at)) < self.window);
    }

    fn retain_recent(&self) {
        let now = self.clock.now();
        let mut recent = self.recent.lock().expect("fan-out map poisoned");
        recent.retain(|_, seen| {
            self.expire(seen, now);
            !seen.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;
    use crate::roster::glob_set;

    fn guard(
        limits: LimitsConfig,
        allow: &[&str],
    ) -> (SendGuard<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        let a2a = AgentToAgentConfig {
            enabled: true,
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
        };
        let allow = glob_set(&a2a.allow).unwrap();
        (SendGuard::new(&limits, &a2a, allow, clock.clone()), clock)
    }

    fn bot(name: &str) -> BotId {
        name.parse().unwrap()
    }

    fn attempt<'a>(sender: &'a BotId, target: &'a BotId) -> SendAttempt<'a> {
        SendAttempt {
            sender,
            target,
            depth: 2,
            passive_to: None,
            from_outside: false,
        }
    }

    #[test]
    fn rules_refuse_self_disallowed_passive_and_deep_sends() {
        let (g, _) = guard(LimitsConfig::default(), &["snark", "caid", "sec*"]);
        let (snark, caid, sec) = (bot("snark"), bot("caid"), bot("sec"));
        assert_eq!(
            g.check_rules(&attempt(&bot("snark"), &bot("snark"))),
            Err(SendRefusal::SelfSend)
        );
        assert_eq!(
            g.check_rules(&attempt(&bot("snark"), &bot("rogue"))),
            Err(SendRefusal::NotAllowed)
        );
        assert_eq!(
            g.check_rules(&attempt(&bot("rogue"), &bot("snark"))),
            Err(SendRefusal::NotAllowed)
        );
        assert_eq!(
            g.check_rules(&attempt(&bot("snark"), &bot("secbot"))),
            Ok(())
        );
        let passive = SendAttempt {
            passive_to: Some(&snark),
            ..attempt(&caid, &snark)
        };
        assert_eq!(g.check_rules(&passive), Err(SendRefusal::PassiveReply));
        let at_max = SendAttempt {
            depth: 3,
            ..attempt(&caid, &sec)
        };
        assert_eq!(g.check_rules(&at_max), Ok(()));
        let deep = SendAttempt {
            depth: 4,
            ..attempt(&caid, &sec)
        };
        assert_eq!(g.check_rules(&deep), Err(SendRefusal::TooDeep));
        let counts: HashMap<_, _> = g.refusals().into_iter().collect();
        assert_eq!(counts[&SendRefusal::NotAllowed], 2);
        assert_eq!(counts[&SendRefusal::PairRate], 0);
    }

    /// An external A2A agent's message reaches the bot through the bot's own sender session:
    /// not a self-send, while every other rule still applies.
    #[test]
    fn a_message_from_outside_is_not_a_self_send() {
        let (g, _) = guard(LimitsConfig::default(), &["snark"]);
        let snark = bot("snark");
        let outside = SendAttempt {
            from_outside: true,
            ..attempt(&snark, &snark)
        };
        assert_eq!(g.check_rules(&outside), Ok(()));
        let deep = SendAttempt {
            depth: 9,
            ..outside
        };
        assert_eq!(g.check_rules(&deep), Err(SendRefusal::TooDeep));
    }

    #[test]
    fn disabled_refuses_everything() {
        let clock = FakeRelativeClock::default();
        let a2a = AgentToAgentConfig {
            enabled: false,
            ..AgentToAgentConfig::default()
        };
        let allow = glob_set(&a2a.allow).unwrap();
        let g = SendGuard::new(&LimitsConfig::default(), &a2a, allow, clock);
        assert_eq!(
            g.check_rules(&attempt(&bot("a"), &bot("b"))),
            Err(SendRefusal::Disabled)
        );
    }

    #[test]
    fn the_eleventh_send_in_a_minute_for_a_pair_is_refused() {
        let (g, clock) = guard(LimitsConfig::default(), &["*"]);
        for i in 0..10 {
            assert_eq!(g.charge(&bot("a"), &bot("b")), Ok(()), "send {i}");
        }
        assert_eq!(g.charge(&bot("a"), &bot("b")), Err(SendRefusal::PairRate));
        assert_eq!(g.charge(&bot("b"), &bot("a")), Ok(()), "pairs are directed");
        clock.advance(Duration::from_secs(60));
        assert_eq!(g.charge(&bot("a"), &bot("b")), Ok(()));
    }

    #[test]
    fn the_sixth_distinct_target_within_the_window_is_refused() {
        let (g, clock) = guard(LimitsConfig::default(), &["*"]);
        for target in ["t1", "t2", "t3", "t4", "t5"] {
            assert_eq!(g.charge(&bot("a"), &bot(target)), Ok(()));
        }
        assert_eq!(g.charge(&bot("a"), &bot("t6")), Err(SendRefusal::FanOut));
        assert_eq!(
            g.charge(&bot("a"), &bot("t1")),
            Ok(()),
            "a target already reached is free"
        );
        assert_eq!(
            g.charge(&bot("z"), &bot("t6")),
            Ok(()),
            "windows are per sender"
        );
        clock.advance(Duration::from_secs(5));
        assert_eq!(g.charge(&bot("a"), &bot("t6")), Ok(()), "the window slid");
        g.retain_recent();
    }

    #[test]
    fn the_sender_budget_spans_targets() {
        let limits = LimitsConfig {
            send_per_sender_per_minute: 3,
            fan_out_targets: 10,
            ..LimitsConfig::default()
        };
        let (g, _) = guard(limits, &["*"]);
        for target in ["t1", "t2", "t3"] {
            assert_eq!(g.charge(&bot("a"), &bot(target)), Ok(()));
        }
        assert_eq!(
            g.charge(&bot("a"), &bot("t4")),
            Err(SendRefusal::SenderRate)
        );
    }
}
