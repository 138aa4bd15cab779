//! The turns running on this instance: what stops them (`/baton stop @bot`, a shutdown past
//! its drain) and, for an agent's turn, the per-turn MCP token that lets the agent call baton's
//! tools as that bot, in that session and run (SPEC 6.1).
//!
//! A token is 32 random bytes, kept only as its SHA-256 digest, and lives exactly as long as
//! its turn: the [`RunningTurn`] guard removes it when the turn ends however it ends (answer,
//! failure, time limit, cancel), so a token presented afterwards resolves to nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use baton_contract::{ChatId, Platform};
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::Caller;
use crate::backend::AgentAccess;
use crate::bot_id::BotId;

/// Why a running turn was stopped before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `/baton stop @bot` in its chat.
    Stopped,
    /// The chain the turn was taken in was closed.
    ChainClosed,
    /// The gateway shut down and the turn outlasted the drain.
    Interrupted,
    /// The A2A agent that asked for it canceled its task.
    Canceled,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Stopped => "stopped by /baton stop",
            Stop::ChainClosed => "stopped: its chain was closed",
            Stop::Interrupted => "interrupted: baton shut down before the turn ended",
            Stop::Canceled => "canceled by the A2A agent that asked for it",
        })
    }
}

struct Entry {
    bot: BotId,
    platform: Platform,
    chat: ChatId,
    run: Option<String>,
    cancel: CancellationToken,
    why: Arc<OnceLock<Stop>>,
}

/// Every turn running here, and the live agent tokens.
#[derive(Default)]
pub struct Running {
    next: AtomicU64,
    turns: Mutex<HashMap<u64, Entry>>,
    tokens: Mutex<HashMap<[u8; 32], Caller>>,
    mcp_url: OnceLock<String>,
}

impl Running {
    /// Where agents reach `/mcp`, set once the HTTP listener is bound. Without it no token is
    /// handed out.
    pub fn set_mcp_url(&self, url: String) {
        let _ = self.mcp_url.set(url);
    }

    /// Register a turn of `caller`; with `grant`, an agent's turn, also a token for `/mcp`.
    pub(crate) fn start(
        &self,
        caller: &Caller,
        grant: bool,
    ) -> (RunningTurn<'_>, Option<AgentAccess>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        let why = Arc::new(OnceLock::new());
        let entry = Entry {
            bot: caller.bot.clone(),
            platform: caller.session.platform,
            chat: caller.session.chat.clone(),
            run: caller.run_id.clone(),
            cancel: cancel.clone(),
            why: Arc::clone(&why),
        };
        lock(&self.turns).insert(id, entry);
        let access = match self.mcp_url.get() {
            Some(url) if grant => {
                let mut secret = [0u8; 32];
                rand::rng().fill_bytes(&mut secret);
                let token: String = secret.iter().map(|b| format!("{b:02x}")).collect();
                let digest = digest(&token);
                lock(&self.tokens).insert(digest, caller.clone());
                Some((
                    digest,
                    AgentAccess {
                        mcp_url: url.clone(),
                        token,
                    },
                ))
            }
            _ => None,
        };
        let turn = RunningTurn {
            running: self,
            id,
            token: access.as_ref().map(|(digest, _)| *digest),
            cancel,
            why,
        };
        (turn, access.map(|(_, access)| access))
    }

    /// Who a per-turn token acts as, while its turn runs.
    pub fn caller_for_token(&self, token: &str) -> Option<Caller> {
        lock(&self.tokens).get(&digest(token)).cloned()
    }

    /// Stop `bot`'s turns in `chat` of `platform` (its threads included); returns how many.
    pub fn stop(&self, bot: &BotId, platform: Platform, chat: &ChatId) -> usize {
        self.cancel(Stop::Stopped, |e| {
            &e.bot == bot && e.platform == platform && &e.chat == chat
        })
    }

    /// Stop the turns whose run id starts with `runs` (a closed chain's), except `spare`'s: the
    /// bot closing its chain from inside its own turn ends that turn itself. Returns how many.
    pub fn stop_runs(&self, runs: &str, spare: &str) -> usize {
        self.cancel(Stop::ChainClosed, |e| {
            e.bot.as_str() != spare && e.run.as_deref().is_some_and(|r| r.starts_with(runs))
        })
    }

    /// Stop the turn of run `run_id` (a canceled A2A task); returns how many (0 or 1).
    pub fn cancel_run(&self, run_id: &str) -> usize {
        self.cancel(Stop::Canceled, |e| e.run.as_deref() == Some(run_id))
    }

    /// Stop every turn (a shutdown past its drain); returns how many.
    pub fn interrupt_all(&self) -> usize {
        self.cancel(Stop::Interrupted, |_| true)
    }

    /// Turns running now.
    pub fn count(&self) -> usize {
        lock(&self.turns).len()
    }

    fn cancel(&self, why: Stop, matches: impl Fn(&Entry) -> bool) -> usize {
        let turns = lock(&self.turns);
        let mut n = 0;
        for entry in turns.values().filter(|e| matches(e)) {
            let _ = entry.why.set(why);
            entry.cancel.cancel();
            n += 1;
        }
        n
    }
}

/// One running turn; dropping it forgets the turn and its token.
pub(crate) struct RunningTurn<'a> {
    running: &'a Running,
    id: u64,
    token: Option<[u8; 32]>,
    cancel: CancellationToken,
    why: Arc<OnceLock<Stop>>,
}

impl RunningTurn<'_> {
    /// Resolves when the turn is stopped, with why.
    pub(crate) async fn stopped(&self) -> Stop {
        self.cancel.cancelled().await;
        self.why.get().copied().unwrap_or(Stop::Stopped)
    }
}

impl Drop for RunningTurn<'_> {
    fn drop(&mut self) {
        lock(&self.running.turns).remove(&self.id);
        if let Some(digest) = &self.token {
            lock(&self.running.tokens).remove(digest);
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The maps hold no invariant a panic could break half-way: a poisoned lock is used as is.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionKey;

    fn caller(bot: &str, chat: &str) -> Caller {
        let session = SessionKey {
            bot: bot.parse().unwrap(),
            platform: Platform::Local,
            account: "acc".into(),
            chat: chat.into(),
            thread: None,
        };
        Caller::from_chat(&session)
    }

    #[test]
    fn a_token_acts_as_its_turn_until_the_turn_ends() {
        let running = Running::default();
        let (_none, access) = running.start(&caller("caid", "c1"), true);
        assert!(access.is_none(), "no listener, no token");
        running.set_mcp_url("http://127.0.0.1:1/mcp".into());
        let (turn, access) = running.start(&caller("caid", "c1"), true);
        let access = access.unwrap();
        assert_eq!(access.token.len(), 64);
        let seen = running.caller_for_token(&access.token).unwrap();
        assert_eq!(seen.bot.as_str(), "caid");
        assert!(running.caller_for_token("not-a-token").is_none());
        drop(turn);
        assert!(running.caller_for_token(&access.token).is_none());
    }

    #[tokio::test]
    async fn stop_cancels_only_that_bots_turns_in_that_chat() {
        let running = Running::default();
        let (caid, _) = running.start(&caller("caid", "c1"), false);
        let (other_chat, _) = running.start(&caller("caid", "c2"), false);
        let (snark, _) = running.start(&caller("snark", "c1"), false);
        let n = running.stop(&"caid".parse().unwrap(), Platform::Local, &"c1".into());
        assert_eq!(n, 1);
        assert_eq!(caid.stopped().await, Stop::Stopped);
        assert!(!other_chat.cancel.is_cancelled() && !snark.cancel.is_cancelled());
        assert_eq!(running.interrupt_all(), 3);
        assert_eq!(snark.stopped().await, Stop::Interrupted);
    }

    #[tokio::test]
    async fn closing_a_chain_stops_its_turns_save_the_closers() {
        let running = Running::default();
        let in_chain = |bot, run: &str| Caller {
            run_id: Some(run.to_owned()),
            ..caller(bot, "c1")
        };
        let (sec, _) = running.start(&in_chain("sec", "chain:ch-1:t2"), false);
        let (closer, _) = running.start(&in_chain("snark", "chain:ch-1:t3"), false);
        let (other, _) = running.start(&in_chain("sec", "chain:ch-10:t1"), false);
        let (outside, _) = running.start(&caller("sec", "c1"), false);
        assert_eq!(running.stop_runs("chain:ch-1:t", "snark"), 1);
        assert_eq!(sec.stopped().await, Stop::ChainClosed);
        for turn in [&closer, &other, &outside] {
            assert!(!turn.cancel.is_cancelled());
        }
    }
}
