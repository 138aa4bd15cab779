//! What a fake platform saw a bot do in a chat while it worked, in the order the requests
//! arrived: posts, edits and deletions of posts, and a typing indicator shown and taken away. Each fake
//! records into one [`Timeline`], so the streaming and typing tests read the same way on every
//! platform.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

/// One thing the platform saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A message was posted, with this platform id.
    Post { id: String, text: String },
    /// A posted message got this new text.
    Edit { id: String, text: String },
    /// A posted message was deleted.
    Delete { id: String },
    /// A typing indicator went up on `at` (a channel, thread or message).
    TypingOn { at: String },
    /// The indicator on `at` was taken away.
    TypingOff { at: String },
}

/// Everything seen so far, with when.
#[derive(Clone, Default)]
pub struct Timeline(Arc<Mutex<Vec<(Instant, Seen)>>>);

impl Timeline {
    /// Record `seen` now.
    pub fn push(&self, seen: Seen) {
        self.0.lock().unwrap().push((Instant::now(), seen));
    }

    /// Everything seen, in order.
    pub fn all(&self) -> Vec<Seen> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// When the first post was made.
    pub fn first_post_at(&self) -> Option<Instant> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(_, s)| matches!(s, Seen::Post { .. }))
            .map(|(at, _)| *at)
    }

    /// When the last post or edit was made: the reply was whole from then on.
    pub fn last_text_at(&self) -> Option<Instant> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(_, s)| matches!(s, Seen::Post { .. } | Seen::Edit { .. }))
            .map(|(at, _)| *at)
    }

    /// Every text that was ever shown in a post or an edit.
    pub fn texts(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Post { text, .. } | Seen::Edit { text, .. } => Some(text),
                _ => None,
            })
            .collect()
    }

    /// Each post's text as the chat shows it now (deleted posts gone), in the order they were
    /// posted.
    pub fn shown(&self) -> Vec<String> {
        let mut order = Vec::new();
        let mut now: BTreeMap<String, String> = BTreeMap::new();
        for seen in self.all() {
            match seen {
                Seen::Post { id, text } => {
                    order.push(id.clone());
                    now.insert(id, text);
                }
                Seen::Edit { id, text } => {
                    now.insert(id, text);
                }
                Seen::Delete { id } => {
                    now.remove(&id);
                }
                _ => {}
            }
        }
        order
            .into_iter()
            .filter_map(|id| now.get(&id).cloned())
            .collect()
    }

    /// How many posts were deleted.
    pub fn deletes(&self) -> usize {
        self.all()
            .iter()
            .filter(|s| matches!(s, Seen::Delete { .. }))
            .count()
    }

    /// How many posts were made.
    pub fn posts(&self) -> usize {
        self.all()
            .iter()
            .filter(|s| matches!(s, Seen::Post { .. }))
            .count()
    }

    /// How many edits were made.
    pub fn edits(&self) -> usize {
        self.all()
            .iter()
            .filter(|s| matches!(s, Seen::Edit { .. }))
            .count()
    }

    /// (typing shown, typing taken away) counts.
    pub fn typing(&self) -> (usize, usize) {
        let all = self.all();
        let on = all
            .iter()
            .filter(|s| matches!(s, Seen::TypingOn { .. }))
            .count();
        let off = all
            .iter()
            .filter(|s| matches!(s, Seen::TypingOff { .. }))
            .count();
        (on, off)
    }
}
