//! Pipeline step 9: lanes. A turn waits for its session, then for a slot on its lane.
//!
//! Two rules meet here. Turns of one session run one at a time, in arrival order (a bot must not
//! answer message 2 before message 1 in the same chat). And each lane (`main` for user messages,
//! `nested` for bot-to-bot deliveries, `subagent`, `cron`) runs at most its configured number of
//! turns at once. Different sessions, including different bots in the same chat, run in parallel.
//!
//! The session lock is taken *before* the lane slot, so a session with a backlog holds at most
//! one slot, and a busy chat cannot starve the others.
//!
//! Each lane also counts its turns per bot, queued or running: a heartbeat must never pile up
//! behind a bot's real work, so the scheduler asks [`Lanes::bot_busy`] before it
//! starts one.
//!
//! A waiting turn holds memory (its event, its future) until it runs, so the waiting room is
//! bounded: [`Lanes::queue`] refuses a turn once its lane has `max_queued` turns waiting, or its
//! session `max_queued_per_session` ([`QueueFull`]); the chat step tells the sender to try again.
//! [`Lanes::enter`] always waits: bot-to-bot, chain and scheduled turns are bounded by their own
//! guards (send budgets, one chain turn at a time, a heartbeat skipped while its bot is busy).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use crate::bot_id::BotId;
use crate::config::LanesConfig;
use crate::session::SessionKey;

/// Which queue a turn runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Turns caused by messages in chats.
    Main,
    /// Bot-to-bot deliveries.
    Nested,
    /// Sub-agent runs.
    Subagent,
    /// Heartbeats and scheduled turns.
    Cron,
}

impl Lane {
    /// Every lane, in display order.
    pub const ALL: [Lane; 4] = [Lane::Main, Lane::Nested, Lane::Subagent, Lane::Cron];

    /// The config and display name.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Main => "main",
            Lane::Nested => "nested",
            Lane::Subagent => "subagent",
            Lane::Cron => "cron",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why a turn was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueFull {
    /// The lane has `max` turns waiting already.
    #[error("the {lane} lane already has {max} turns waiting ([lanes] max_queued)")]
    Lane {
        /// The lane.
        lane: Lane,
        /// `[lanes] max_queued`.
        max: usize,
    },
    /// The session has `max` turns waiting already.
    #[error("this conversation already has {max} turns waiting ([lanes] max_queued_per_session)")]
    Session {
        /// `[lanes] max_queued_per_session`.
        max: usize,
    },
}

impl QueueFull {
    /// Short name for metrics and the transcript.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueFull::Lane { .. } => "lane_queue_full",
            QueueFull::Session { .. } => "session_queue_full",
        }
    }
}

struct LaneState {
    slots: Arc<Semaphore>,
    capacity: usize,
    /// Turns waiting for their session or a slot.
    queued: AtomicUsize,
    /// Turns holding a slot.
    running: AtomicUsize,
}

/// A snapshot of one lane, for `/baton status` and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneLoad {
    /// The lane.
    pub lane: Lane,
    /// Configured concurrency.
    pub capacity: usize,
    /// Turns waiting.
    pub queued: usize,
    /// Turns running.
    pub running: usize,
}

/// One session's lock and how many of its turns wait for it or for a slot.
struct SessionQueue {
    lock: Arc<tokio::sync::Mutex<()>>,
    waiting: AtomicUsize,
}

/// The lanes and the per-session locks. Cheap to share behind an `Arc`.
pub struct Lanes {
    lanes: [LaneState; 4],
    /// `[lanes] max_queued`.
    max_queued: usize,
    /// `[lanes] max_queued_per_session`.
    max_queued_per_session: usize,
    /// Weak so a session's entry disappears once no turn holds or waits for it.
    sessions: Mutex<HashMap<SessionKey, Weak<SessionQueue>>>,
    /// Turns queued or running, per lane and bot; an entry is removed when it drops to zero.
    per_bot: Mutex<HashMap<(Lane, BotId), usize>>,
}

/// Held while a turn runs: its session lock and its lane slot. Dropping it lets the next go.
pub struct LaneGuard {
    _session: OwnedMutexGuard<()>,
    _queue: Arc<SessionQueue>,
    _slot: OwnedSemaphorePermit,
    _bot: BotTurn,
    running: Arc<Lanes>,
    lane: Lane,
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        self.running.lanes[self.lane.index()]
            .running
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A turn admitted to its lane's waiting room; [`Queued::wait`] waits for its turn to run.
/// Dropped before it got in (the caller gave up), it no longer counts.
pub struct Queued {
    waiting: Waiting,
    bot: BotTurn,
}

/// Counts one turn as waiting on its lane and in its session until dropped.
struct Waiting {
    lanes: Arc<Lanes>,
    lane: Lane,
    session: Arc<SessionQueue>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.lanes.lanes[self.lane.index()]
            .queued
            .fetch_sub(1, Ordering::Relaxed);
        self.session.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Queued {
    /// Wait for the session's previous turns to finish, then for a slot on the lane.
    pub async fn wait(self) -> LaneGuard {
        let Queued { waiting, bot } = self;
        let session = Arc::clone(&waiting.session);
        let lock = Arc::clone(&session.lock).lock_owned().await;
        let lanes = Arc::clone(&waiting.lanes);
        let lane = waiting.lane;
        let state = &lanes.lanes[lane.index()];
        let slot = Arc::clone(&state.slots)
            .acquire_owned()
            .await
            .expect("lane semaphores are never closed");
        drop(waiting);
        state.running.fetch_add(1, Ordering::Relaxed);
        LaneGuard {
            _session: lock,
            _queue: session,
            _slot: slot,
            _bot: bot,
            running: lanes,
            lane,
        }
    }
}

/// One turn counted against its bot from the moment it asks for the lane until its guard drops,
/// also when the waiting future is dropped before it got in.
struct BotTurn {
    lanes: Arc<Lanes>,
    key: (Lane, BotId),
}

impl BotTurn {
    fn new(lanes: &Arc<Lanes>, lane: Lane, bot: &BotId) -> BotTurn {
        let key = (lane, bot.clone());
        *lanes
            .per_bot
            .lock()
            .expect("lane map poisoned")
            .entry(key.clone())
            .or_default() += 1;
        BotTurn {
            lanes: Arc::clone(lanes),
            key,
        }
    }
}

impl Drop for BotTurn {
    fn drop(&mut self) {
        let mut per_bot = self.lanes.per_bot.lock().expect("lane map poisoned");
        if let Some(count) = per_bot.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                per_bot.remove(&self.key);
            }
        }
    }
}

impl Lanes {
    /// Lanes sized by `[lanes]` (validation guarantees every size is at least 1).
    pub fn new(config: &LanesConfig) -> Arc<Lanes> {
        let lane = |capacity: usize| LaneState {
            slots: Arc::new(Semaphore::new(capacity.max(1))),
            capacity: capacity.max(1),
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
        };
        Arc::new(Lanes {
            lanes: [
                lane(config.main),
                lane(config.nested),
                lane(config.subagent),
                lane(config.cron),
            ],
            max_queued: config.max_queued,
            max_queued_per_session: config.max_queued_per_session,
            sessions: Mutex::new(HashMap::new()),
            per_bot: Mutex::new(HashMap::new()),
        })
    }

    /// Admit a turn of `session` to `lane`'s waiting room, unless the lane or the session has
    /// its maximum of turns waiting. The turn counts as the session's bot's from now on.
    pub fn queue(self: &Arc<Self>, lane: Lane, session: &SessionKey) -> Result<Queued, QueueFull> {
        let queue = self.session_queue(session);
        let max = self.max_queued_per_session;
        queue
            .waiting
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| QueueFull::Session { max })?;
        let max = self.max_queued;
        let admitted = self.lanes[lane.index()].queued.fetch_update(
            Ordering::Relaxed,
            Ordering::Relaxed,
            |n| (n < max).then_some(n + 1),
        );
        if admitted.is_err() {
            queue.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(QueueFull::Lane { lane, max });
        }
        Ok(self.queued(lane, &session.bot, queue))
    }

    /// Wait for `session`'s previous turns to finish, then for a slot on `lane`, however many
    /// wait already. The turn counts as the session's bot's (for [`Lanes::bot_busy`]) from now
    /// until the guard drops.
    pub async fn enter(self: &Arc<Self>, lane: Lane, session: &SessionKey) -> LaneGuard {
        let queue = self.session_queue(session);
        queue.waiting.fetch_add(1, Ordering::Relaxed);
        self.lanes[lane.index()]
            .queued
            .fetch_add(1, Ordering::Relaxed);
        self.queued(lane, &session.bot, queue).wait().await
    }

    /// A turn already counted as waiting on `lane` and in `queue`.
    fn queued(self: &Arc<Self>, lane: Lane, bot: &BotId, queue: Arc<SessionQueue>) -> Queued {
        Queued {
            bot: BotTurn::new(self, lane, bot),
            waiting: Waiting {
                lanes: Arc::clone(self),
                lane,
                session: queue,
            },
        }
    }

    /// Whether `bot` has turns queued or running on `lane`.
    pub fn bot_busy(&self, lane: Lane, bot: &BotId) -> bool {
        let per_bot = self.per_bot.lock().expect("lane map poisoned");
        per_bot.contains_key(&(lane, bot.clone()))
    }

    /// How many turns `bot` has queued or running, on every lane.
    pub fn bot_turns(&self, bot: &BotId) -> usize {
        let per_bot = self.per_bot.lock().expect("lane map poisoned");
        per_bot
            .iter()
            .filter(|((_, b), _)| b == bot)
            .map(|(_, n)| *n)
            .sum()
    }

    /// Whether `session` has a turn running or waiting (anyone but us holds its entry).
    pub fn session_busy(&self, session: &SessionKey) -> bool {
        let sessions = self.sessions.lock().expect("lane map poisoned");
        sessions
            .get(session)
            .and_then(Weak::upgrade)
            .is_some_and(|queue| Arc::strong_count(&queue) > 1)
    }

    /// Load of every lane.
    pub fn load(&self) -> Vec<LaneLoad> {
        Lane::ALL
            .into_iter()
            .map(|lane| {
                let s = &self.lanes[lane.index()];
                LaneLoad {
                    lane,
                    capacity: s.capacity,
                    queued: s.queued.load(Ordering::Relaxed),
                    running: s.running.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    fn session_queue(&self, session: &SessionKey) -> Arc<SessionQueue> {
        // A std mutex: held only for a map lookup, never across an await.
        let mut sessions = self.sessions.lock().expect("lane map poisoned");
        if let Some(queue) = sessions.get(session).and_then(Weak::upgrade) {
            return queue;
        }
        if sessions.len() >= 1024 {
            sessions.retain(|_, weak| weak.strong_count() > 0);
        }
        let queue = Arc::new(SessionQueue {
            lock: Arc::new(tokio::sync::Mutex::new(())),
            waiting: AtomicUsize::new(0),
        });
        sessions.insert(session.clone(), Arc::downgrade(&queue));
        queue
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// `bot`'s session in local chat `chat`.
    fn key(bot: &str, chat: &str) -> SessionKey {
        format!("bot:{bot}:local:{bot}:{chat}").parse().unwrap()
    }

    fn lanes(main: usize) -> Arc<Lanes> {
        Lanes::new(&LanesConfig {
            main,
            ..LanesConfig::default()
        })
    }

    #[tokio::test]
    async fn one_session_runs_serially_in_order() {
        let lanes = lanes(4);
        let first = lanes.enter(Lane::Main, &key("bot", "s")).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let lanes = Arc::clone(&lanes);
            let tx = tx.clone();
            tokio::spawn(async move {
                let _g = lanes.enter(Lane::Main, &key("bot", "s")).await;
                tx.send(i).unwrap();
            });
            tokio::task::yield_now().await;
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(50), rx.recv())
                .await
                .is_err(),
            "a second turn ran while the first held the session"
        );
        assert!(lanes.session_busy(&key("bot", "s")));
        drop(first);
        let order: Vec<_> = [rx.recv().await, rx.recv().await, rx.recv().await]
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(order, vec![0, 1, 2]);
    }

    #[tokio::test]
    async fn different_sessions_run_in_parallel_up_to_the_lane_size() {
        let lanes = lanes(2);
        let a = lanes.enter(Lane::Main, &key("bot", "a")).await;
        let b = lanes.enter(Lane::Main, &key("bot", "b")).await;
        let load = lanes.load()[0];
        assert_eq!((load.running, load.capacity), (2, 2));
        let blocked = {
            let lanes = Arc::clone(&lanes);
            tokio::spawn(async move { lanes.enter(Lane::Main, &key("bot", "c")).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!blocked.is_finished(), "lane size 2 let a third turn run");
        assert_eq!(lanes.load()[0].queued, 1);
        drop(a);
        let _c = blocked.await.unwrap();
        drop(b);
        assert_eq!(lanes.load()[0].running, 1);
    }

    #[tokio::test]
    async fn lanes_are_independent() {
        let lanes = lanes(1);
        let _main = lanes.enter(Lane::Main, &key("bot", "a")).await;
        let other = key("bot", "b");
        let nested =
            tokio::time::timeout(Duration::from_secs(1), lanes.enter(Lane::Nested, &other));
        assert!(
            nested.await.is_ok(),
            "a full main lane blocked the nested lane"
        );
    }

    #[tokio::test]
    async fn a_bot_is_busy_while_its_turns_wait_or_run_on_that_lane() {
        let lanes = lanes(1);
        assert!(!lanes.bot_busy(Lane::Main, &"snark".parse().unwrap()));
        let running = lanes.enter(Lane::Main, &key("snark", "a")).await;
        assert!(lanes.bot_busy(Lane::Main, &"snark".parse().unwrap()));
        assert!(!lanes.bot_busy(Lane::Main, &"caid".parse().unwrap()));
        assert!(
            !lanes.bot_busy(Lane::Cron, &"snark".parse().unwrap()),
            "lanes count apart"
        );
        // A second turn waiting for the full lane keeps the bot busy after the first ends.
        let waiting = {
            let lanes = Arc::clone(&lanes);
            tokio::spawn(async move { lanes.enter(Lane::Main, &key("snark", "b")).await })
        };
        while lanes.load()[0].queued == 0 {
            tokio::task::yield_now().await;
        }
        drop(running);
        let second = waiting.await.unwrap();
        assert!(lanes.bot_busy(Lane::Main, &"snark".parse().unwrap()));
        drop(second);
        assert!(!lanes.bot_busy(Lane::Main, &"snark".parse().unwrap()));
    }

    #[tokio::test]
    async fn a_full_waiting_room_refuses_and_a_place_given_up_is_free_again() {
        let lanes = Lanes::new(&LanesConfig {
            main: 1,
            max_queued: 2,
            max_queued_per_session: 1,
            ..LanesConfig::default()
        });
        let running = lanes
            .queue(Lane::Main, &key("snark", "a"))
            .unwrap()
            .wait()
            .await;
        let behind = lanes.queue(Lane::Main, &key("snark", "a")).unwrap();
        assert_eq!(
            lanes.queue(Lane::Main, &key("snark", "a")).err(),
            Some(QueueFull::Session { max: 1 })
        );
        let other = lanes.queue(Lane::Main, &key("snark", "b")).unwrap();
        assert_eq!(
            lanes.queue(Lane::Main, &key("caid", "c")).err(),
            Some(QueueFull::Lane {
                lane: Lane::Main,
                max: 2
            })
        );
        assert_eq!(
            lanes.load()[0].queued,
            2,
            "refusals are not counted as waiting"
        );
        assert!(
            lanes.queue(Lane::Nested, &key("caid", "c")).is_ok(),
            "each lane has its own room"
        );
        drop(other);
        assert!(
            lanes.queue(Lane::Main, &key("caid", "c")).is_ok(),
            "a place given up is free"
        );
        drop(running);
        let second = behind.wait().await;
        assert_eq!(lanes.load()[0].queued, 0);
        drop(second);
    }

    #[tokio::test]
    async fn a_turn_given_up_while_waiting_no_longer_counts() {
        let lanes = lanes(1);
        let held = lanes.enter(Lane::Main, &key("caid", "a")).await;
        let gave_up = tokio::time::timeout(
            Duration::from_millis(10),
            lanes.enter(Lane::Main, &key("snark", "b")),
        )
        .await;
        assert!(gave_up.is_err());
        assert!(!lanes.bot_busy(Lane::Main, &"snark".parse().unwrap()));
        drop(held);
    }
}
