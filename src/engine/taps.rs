//! Listeners on a turn's reply while it is written: `POST /v1/chat/completions` with
//! `stream: true` opens a [`Tap`] on the message it hands the pipeline, and an A2A stream one on
//! the task (a delivery's run) it follows; the turn that answers that message, or runs that
//! delivery, sends it each piece of text as soon as it is certain (never a piece of the silent
//! token: see `deliver::Draft`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use baton_contract::{AccountId, MessageId};
use tokio::sync::mpsc;

/// What a tap listens for.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Listened {
    /// The reply to a message an account received.
    Reply(AccountId, MessageId),
    /// The reply of a delivery's run, by its run id.
    Run(String),
}

/// The open taps, by what they listen for.
#[derive(Default, Clone)]
pub struct Taps(Arc<Mutex<HashMap<Listened, mpsc::UnboundedSender<String>>>>);

impl Taps {
    /// Listen to the reply to `message` (received by `account`) while it is written. The tap
    /// closes when dropped.
    pub fn open(&self, account: &AccountId, message: &MessageId) -> Tap {
        self.listen(Listened::Reply(account.clone(), message.clone()))
    }

    /// Listen to the reply of run `run_id` (a delivery's) while it is written: the newest tap
    /// on a run hears it. The tap closes when dropped.
    pub fn open_run(&self, run_id: &str) -> Tap {
        self.listen(Listened::Run(run_id.to_owned()))
    }

    fn listen(&self, key: Listened) -> Tap {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().insert(key.clone(), tx.clone());
        Tap {
            taps: self.clone(),
            key,
            own: tx,
            pieces: rx,
        }
    }

    /// Where pieces of the reply to `message` go, if anyone listens.
    pub(crate) fn sender(
        &self,
        account: &AccountId,
        message: &MessageId,
    ) -> Option<mpsc::UnboundedSender<String>> {
        self.find(&Listened::Reply(account.clone(), message.clone()))
    }

    /// Where pieces of run `run_id`'s reply go, if anyone listens.
    pub(crate) fn run_sender(&self, run_id: &str) -> Option<mpsc::UnboundedSender<String>> {
        self.find(&Listened::Run(run_id.to_owned()))
    }

    fn find(&self, key: &Listened) -> Option<mpsc::UnboundedSender<String>> {
        self.lock().get(key).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Listened, mpsc::UnboundedSender<String>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One listener: the pieces of text, in order.
pub struct Tap {
    taps: Taps,
    key: Listened,
    /// Its own sender: a newer tap on the same key is not closed with this one.
    own: mpsc::UnboundedSender<String>,
    /// Each piece of the reply as it becomes certain.
    pub pieces: mpsc::UnboundedReceiver<String>,
}

impl Drop for Tap {
    fn drop(&mut self) {
        let mut taps = self.taps.lock();
        if taps
            .get(&self.key)
            .is_some_and(|t| t.same_channel(&self.own))
        {
            taps.remove(&self.key);
        }
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

    #[test]
    fn a_run_is_heard_by_its_newest_tap_and_an_older_one_closing_leaves_it_open() {
        let taps = Taps::default();
        let older = taps.open_run("r1");
        let mut newer = taps.open_run("r1");
        drop(older);
        let sender = taps.run_sender("r1").expect("the newer tap is open");
        sender.send("Hi".into()).unwrap();
        assert_eq!(newer.pieces.try_recv().as_deref(), Ok("Hi"));
        assert!(taps.run_sender("r2").is_none());
        assert!(
            taps.sender(&AccountId::from("r1"), &MessageId::from("r1"))
                .is_none()
        );
    }
}
