//! Listeners on a turn's reply while it is written: `POST /v1/chat/completions` with
//! `stream: true` opens a [`Tap`] on the message it hands the pipeline, and the turn that
//! answers that message sends it each piece of text as soon as it is certain (never a piece of
//! the silent token: see `deliver::Draft`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use baton_contract::{AccountId, MessageId};
use tokio::sync::mpsc;

/// The open taps, by the message they listen for.
#[derive(Default, Clone)]
pub struct Taps(Arc<Mutex<HashMap<String, mpsc::UnboundedSender<String>>>>);

impl Taps {
    /// Listen to the reply to `message` (received by `account`) while it is written. The tap
    /// closes when dropped.
    pub fn open(&self, account: &AccountId, message: &MessageId) -> Tap {
        let (tx, rx) = mpsc::unbounded_channel();
        let key = key(account, message);
        self.lock().insert(key.clone(), tx);
        Tap {
            taps: self.clone(),
            key,
            pieces: rx,
        }
    }

    /// Where pieces of the reply to `message` go, if anyone listens.
    pub(crate) fn sender(
        &self,
        account: &AccountId,
        message: &MessageId,
    ) -> Option<mpsc::UnboundedSender<String>> {
        self.lock().get(&key(account, message)).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<String>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(account: &AccountId, message: &MessageId) -> String {
    format!("{account}\n{message}")
}

/// One listener: the pieces of text, in order.
pub struct Tap {
    taps: Taps,
    key: String,
    /// Each piece of the reply as it becomes certain.
    pub pieces: mpsc::UnboundedReceiver<String>,
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.taps.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_answering_a_tapped_message_reaches_its_tap_and_no_other() {
        let taps = Taps::default();
        let (account, message) = (AccountId::from("lead"), MessageId::from("m1"));
        let mut tap = taps.open(&account, &message);
        let sender = taps.sender(&account, &message).expect("the tap is open");
        sender.send("Hel".into()).unwrap();
        sender.send("lo".into()).unwrap();
        assert_eq!(tap.pieces.try_recv().as_deref(), Ok("Hel"));
        assert_eq!(tap.pieces.try_recv().as_deref(), Ok("lo"));
        assert!(taps.sender(&AccountId::from("other"), &message).is_none());
        assert!(taps.sender(&account, &MessageId::from("m2")).is_none());
    }

    #[test]
    fn a_dropped_tap_is_no_longer_found() {
        let taps = Taps::default();
        let (account, message) = (AccountId::from("lead"), MessageId::from("m1"));
        drop(taps.open(&account, &message));
        assert!(taps.sender(&account, &message).is_none());
    }
}
