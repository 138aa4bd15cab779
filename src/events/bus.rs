//! The bus: ids, the replay ring and the broadcast to subscribers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::broadcast;

use super::frame::frame;
use super::{Activity, Event};
use crate::timing::now_ms;

/// Events kept for clients that reconnect (`Last-Event-ID`): the most recent this many.
pub const REPLAY: usize = 4096;
/// How far a subscriber may fall behind before it is dropped (it reconnects and catches up
/// from the ring).
pub const LAG: usize = 1024;

/// An event with its place in the stream.
#[derive(Debug, Clone, Serialize)]
pub struct Stamped {
    /// Increases by one per event, from 1 at the gateway's start.
    pub id: u64,
    /// When it happened, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
    /// The gateway run that stamped it (see [`Events::run`]).
    #[serde(skip)]
    run: Arc<str>,
    /// This, as `/api/events` sends it ([`Stamped::frame`]).
    #[serde(skip)]
    frame: OnceLock<Bytes>,
}

impl Stamped {
    /// This, as `/api/events` sends it: made by the first reader that asks (`frame.rs`), then
    /// shared by every reader.
    pub fn frame(&self) -> &Bytes {
        self.frame
            .get_or_init(|| frame(&self.event, &self.run, self.id, self.ts_ms))
    }
}

/// The gateway's event bus. Cheap to clone; every clone is the same bus.
#[derive(Clone)]
pub struct Events {
    inner: Arc<Inner>,
}

struct Inner {
    /// The ring, and the last id given. Emitting and subscribing take it, so an event is either
    /// in a new subscriber's backlog or in its live feed, never both, never neither.
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<Stamped>>,
    activity: Activity,
    /// This run of the gateway: a random token, part of every event id sent.
    run: Arc<str>,
}

#[derive(Default)]
struct Ring {
    last: u64,
    kept: VecDeque<Arc<Stamped>>,
}

/// What a new subscriber gets: what it missed, then everything new.
pub struct Subscription {
    /// Events after the id it gave, oldest first.
    pub backlog: Vec<Arc<Stamped>>,
    /// Some of what it missed is no longer kept (or the gateway restarted since): it should
    /// read the state afresh from `/api/...`.
    pub gap: bool,
    /// New events as they are emitted.
    pub live: broadcast::Receiver<Arc<Stamped>>,
}

impl Default for Events {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                ring: Mutex::new(Ring::default()),
                live: broadcast::channel(LAG).0,
                activity: Activity::default(),
                run: uuid::Uuid::new_v4().simple().to_string()[..8].into(),
            }),
        }
    }
}

impl Events {
    /// Announce `event`: stamped, kept in the ring, sent to every subscriber. Never waits for
    /// a subscriber.
    pub fn emit(&self, event: Event) {
        let ts_ms = now_ms();
        let mut ring = self.inner.ring.lock().expect("event ring poisoned");
        ring.last += 1;
        let stamped = Arc::new(Stamped {
            id: ring.last,
            ts_ms,
            event,
            run: Arc::clone(&self.inner.run),
            frame: OnceLock::new(),
        });
        self.inner.activity.fold(&stamped.event, stamped.ts_ms);
        if ring.kept.len() == REPLAY {
            ring.kept.pop_front();
        }
        ring.kept.push_back(Arc::clone(&stamped));
        // No subscriber is not an error.
        let _ = self.inner.live.send(stamped);
    }

    /// Subscribe, resuming after event `after` (a client's `Last-Event-ID`) when given.
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        let ring = self.inner.ring.lock().expect("event ring poisoned");
        let live = self.inner.live.subscribe();
        let Some(after) = after else {
            return Subscription {
                backlog: Vec::new(),
                gap: false,
                live,
            };
        };
        // An id from the future was given out by an earlier run of the gateway: all of this
        // run's events are news to the client.
        let after = if after > ring.last { 0 } else { after };
        let oldest = ring.kept.front().map_or(ring.last + 1, |e| e.id);
        let backlog = ring.kept.iter().filter(|e| e.id > after).cloned().collect();
        Subscription {
            backlog,
            gap: oldest > after + 1,
            live,
        }
    }

    /// Subscribe for a client whose last event came from an earlier run of the gateway: all
    /// that is kept is news to it, after a gap (what the earlier run sent last is gone).
    pub fn subscribe_after_restart(&self) -> Subscription {
        Subscription {
            gap: true,
            ..self.subscribe(Some(0))
        }
    }

    /// This run of the gateway, as the event ids `/api/events` sends carry it (`<run>.<n>`),
    /// so a client resuming with an id from an earlier run is told of the gap.
    pub fn run(&self) -> &str {
        &self.inner.run
    }

    /// The id of the last event emitted (0 before the first): a client that reads the state
    /// from `/api/...` and then subscribes after this id misses nothing in between.
    pub fn last_id(&self) -> u64 {
        self.inner.ring.lock().expect("event ring poisoned").last
    }

    /// What each bot is doing now, as the turn events tell it.
    pub fn activity(&self) -> &Activity {
        &self.inner.activity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(n: usize) -> Event {
        Event::GuardRefused {
            guard: "chain".into(),
            reason: format!("r{n}"),
            bot: "a".parse().unwrap(),
            chat: None,
        }
    }

    #[test]
    fn a_subscriber_resumes_after_its_last_id_from_the_ring() {
        let events = Events::default();
        for n in 0..5 {
            events.emit(refusal(n));
        }
        let resumed = events.subscribe(Some(3));
        let ids: Vec<u64> = resumed.backlog.iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 5]);
        assert!(!resumed.gap);
        assert!(events.subscribe(None).backlog.is_empty());
    }

    #[test]
    fn the_ring_is_bounded_and_a_resume_past_it_is_told_of_the_gap() {
        let events = Events::default();
        for n in 0..REPLAY + 10 {
            events.emit(refusal(n));
        }
        let resumed = events.subscribe(Some(2));
        assert_eq!(resumed.backlog.len(), REPLAY);
        assert_eq!(resumed.backlog[0].id, 11);
        assert!(resumed.gap);
        // An id this run never gave (the gateway restarted): everything kept is news.
        let restarted = events.subscribe(Some(1_000_000));
        assert_eq!(restarted.backlog.len(), REPLAY);
        assert!(restarted.gap);
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_dropped_and_never_blocks_the_sender() {
        let events = Events::default();
        let mut slow = events.subscribe(None).live;
        for n in 0..LAG * 3 {
            events.emit(refusal(n)); // returns at once although nobody reads
        }
        assert!(matches!(
            slow.recv().await,
            Err(broadcast::error::RecvError::Lagged(_))
        ));
    }
}
