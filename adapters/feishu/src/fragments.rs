//! Reassembly of events Feishu splits over several data frames.
//!
//! A large event arrives as `sum` frames sharing one `message_id` header, each with its `seq`
//! (0-based). The parts are joined in `seq` order once all have come; the SDKs keep parts for a
//! few seconds, and so does this, so a part whose siblings never arrive (the connection dropped)
//! cannot pile up. Feishu then redelivers the whole event, which the gateway's dedupe recognises
//! if the first copy did get through.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::frame::Frame;

/// How long the parts of an unfinished event are kept.
pub const KEEP_FOR: Duration = Duration::from_secs(10);
/// The most fragments one event may claim; more is a malformed frame.
pub const MAX_PARTS: usize = 256;
/// The most unfinished events kept at once.
const MAX_PENDING: usize = 64;

struct Pending {
    parts: Vec<Option<Vec<u8>>>,
    since: Instant,
}

/// Unfinished events, by the frame header `message_id`.
#[derive(Default)]
pub struct Fragments {
    pending: HashMap<String, Pending>,
}

/// What one fragment did.
#[derive(Debug, PartialEq, Eq)]
pub enum Assembled {
    /// The whole payload, in order.
    Complete(Vec<u8>),
    /// Waiting for more parts.
    Partial,
    /// `sum` or `seq` make no sense; the fragment is dropped.
    Invalid,
}

impl Fragments {
    /// Add part `seq` of `sum` for `message_id`.
    pub fn add(&mut self, message_id: &str, sum: usize, seq: usize, part: Vec<u8>) -> Assembled {
        self.add_at(Instant::now(), message_id, sum, seq, part)
    }

    /// [`Fragments::add`] at `now`: the clock is an argument, so a test can let parts go stale
    /// without tokio's paused time (its `test-util` feature, which would rebuild tokio and every
    /// crate above it for the tests).
    fn add_at(
        &mut self,
        now: Instant,
        message_id: &str,
        sum: usize,
        seq: usize,
        part: Vec<u8>,
    ) -> Assembled {
        if sum <= 1 {
            return Assembled::Complete(part);
        }
        if sum > MAX_PARTS || seq >= sum {
            return Assembled::Invalid;
        }
        self.pending
            .retain(|_, p| now.duration_since(p.since) < KEEP_FOR);
        if !self.pending.contains_key(message_id) && self.pending.len() >= MAX_PENDING {
            return Assembled::Invalid;
        }
        let entry = self
            .pending
            .entry(message_id.to_owned())
            .or_insert_with(|| Pending {
                parts: vec![None; sum],
                since: now,
            });
        if entry.parts.len() != sum {
            return Assembled::Invalid;
        }
        entry.parts[seq] = Some(part);
        if entry.parts.iter().any(Option::is_none) {
            return Assembled::Partial;
        }
        let done = self.pending.remove(message_id).expect("just filled");
        Assembled::Complete(done.parts.into_iter().flatten().flatten().collect())
    }

    /// Add a data frame: its `message_id`, `sum` and `seq` headers say which part it is (an
    /// absent or unreadable `sum` is 1, `seq` 0), its payload is the part.
    pub fn add_frame(&mut self, frame: &Frame) -> Assembled {
        let number = |key: &str, default: usize| {
            frame
                .header(key)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let payload = frame.payload.clone().unwrap_or_default();
        let id = frame.header("message_id").unwrap_or("");
        self.add(id, number("sum", 1), number("seq", 0), payload)
    }

    /// How many events are waiting for parts.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parts_in_any_order_join_in_seq_order() {
        let mut f = Fragments::default();
        assert_eq!(f.add("m", 3, 2, b"c".to_vec()), Assembled::Partial);
        assert_eq!(f.add("m", 3, 0, b"a".to_vec()), Assembled::Partial);
        assert_eq!(
            f.add("other", 1, 0, b"x".to_vec()),
            Assembled::Complete(b"x".to_vec())
        );
        assert_eq!(
            f.add("m", 3, 1, b"b".to_vec()),
            Assembled::Complete(b"abc".to_vec())
        );
        assert_eq!(f.pending(), 0);
    }

    #[tokio::test]
    async fn nonsense_is_refused() {
        let mut f = Fragments::default();
        assert_eq!(f.add("m", 2, 2, vec![]), Assembled::Invalid);
        assert_eq!(f.add("m", MAX_PARTS + 1, 0, vec![]), Assembled::Invalid);
        assert_eq!(f.add("m", 2, 0, vec![]), Assembled::Partial);
        assert_eq!(f.add("m", 3, 1, vec![]), Assembled::Invalid, "sum changed");
    }

    #[test]
    fn stale_parts_are_forgotten() {
        let mut f = Fragments::default();
        let start = Instant::now();
        assert_eq!(
            f.add_at(start, "m", 2, 0, b"a".to_vec()),
            Assembled::Partial
        );
        let later = start + KEEP_FOR + Duration::from_millis(1);
        assert_eq!(
            f.add_at(later, "m", 2, 1, b"b".to_vec()),
            Assembled::Partial
        );
        assert_eq!(f.pending(), 1);
    }
}
