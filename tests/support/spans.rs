//! When each account had a websocket open on a fake platform: the fakes of Slack (Socket Mode),
//! Discord (the gateway) and Feishu (the long connection) record every socket's open and close
//! the same way, so a test asks any of them how many sockets an account had open at once (two
//! would mean two instances on one account) and how long it went without one (a rolling
//! restart's gap).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When one websocket was open.
#[derive(Debug, Clone)]
pub struct Span {
    /// The account it belonged to (the fake's name for it: app, bot user id).
    pub account: String,
    /// When it opened (for Discord: when it identified or resumed).
    pub opened: Instant,
    /// When it closed, if it has.
    pub closed: Option<Instant>,
}

/// Every websocket a fake saw, in the order they opened.
#[derive(Clone, Default)]
pub struct Spans(Arc<Mutex<Vec<Span>>>);

/// One socket's place in its [`Spans`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanId(usize);

impl Spans {
    /// A socket of `account` opened now.
    pub fn open(&self, account: &str) -> SpanId {
        let mut spans = self.0.lock().unwrap();
        spans.push(Span {
            account: account.to_owned(),
            opened: Instant::now(),
            closed: None,
        });
        SpanId(spans.len() - 1)
    }

    /// Socket `id` closed now (a second close keeps the first).
    pub fn close(&self, id: SpanId) {
        let mut spans = self.0.lock().unwrap();
        spans[id.0].closed.get_or_insert_with(Instant::now);
    }

    /// `account`'s sockets, in the order they opened.
    pub fn of(&self, account: &str) -> Vec<Span> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.account == account)
            .cloned()
            .collect()
    }

    /// The most sockets `account` had open at the same time.
    pub fn max_open(&self, account: &str) -> usize {
        let spans = self.of(account);
        spans
            .iter()
            .map(|at| {
                spans
                    .iter()
                    .filter(|s| s.opened <= at.opened && s.closed.is_none_or(|c| c > at.opened))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    /// The longest time `account` had no socket open, between its first socket's opening and
    /// its last one's.
    pub fn longest_gap(&self, account: &str) -> Duration {
        let mut longest = Duration::ZERO;
        // Until when the sockets opened so far cover; `None`: one is still open.
        let mut covered: Option<Option<Instant>> = None;
        for span in self.of(account) {
            if let Some(Some(until)) = covered {
                longest = longest.max(span.opened.saturating_duration_since(until));
            }
            covered = Some(match (covered, span.closed) {
                (Some(None), _) | (_, None) => None,
                (Some(Some(until)), Some(closed)) => Some(until.max(closed)),
                (None, Some(closed)) => Some(closed),
            });
        }
        longest
    }
}
