//! What each bot is doing now, folded from the turn events as they are emitted (the roster
//! shows it). Queued turns are the lanes' to count; this knows the running ones.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::bot_id::BotId;

use super::Event;

/// The turns running now.
#[derive(Default)]
pub struct Activity {
    running: Mutex<HashMap<(String, String), RunningTurn>>,
}

/// One running turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningTurn {
    /// The bot.
    pub bot: BotId,
    /// The session (its chat is in the key).
    pub session: String,
    /// The run.
    pub run_id: String,
    /// When it started, milliseconds since the Unix epoch.
    pub since_ms: i64,
}

impl Activity {
    /// Take in `event`, emitted at `ts_ms`.
    pub(super) fn fold(&self, event: &Event, ts_ms: i64) {
        let mut running = self.running.lock().expect("activity poisoned");
        match event {
            Event::TurnStarted {
                bot,
                session,
                run_id,
            } => {
                let turn = RunningTurn {
                    bot: bot.clone(),
                    session: session.clone(),
                    run_id: run_id.clone(),
                    since_ms: ts_ms,
                };
                running.insert((session.clone(), run_id.clone()), turn);
            }
            Event::TurnEnded {
                session, run_id, ..
            } => {
                running.remove(&(session.clone(), run_id.clone()));
            }
            _ => {}
        }
    }

    /// The turns running now, oldest first.
    pub fn running(&self) -> Vec<RunningTurn> {
        let running = self.running.lock().expect("activity poisoned");
        let mut turns: Vec<RunningTurn> = running.values().cloned().collect();
        turns.sort_by_key(|t| t.since_ms);
        turns
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Events, TurnOutcome};
    use super::*;

    #[test]
    fn a_turn_runs_from_its_start_to_its_end() {
        let events = Events::default();
        let started = |run: &str| Event::TurnStarted {
            bot: "caid".parse().unwrap(),
            session: "s".into(),
            run_id: run.into(),
        };
        events.emit(started("r1"));
        events.emit(started("r2"));
        events.emit(Event::TurnEnded {
            bot: "caid".parse().unwrap(),
            session: "s".into(),
            run_id: "r1".into(),
            outcome: TurnOutcome::Reply,
            model: "echo".into(),
            elapsed_ms: 1,
        });
        let runs: Vec<String> = events
            .activity()
            .running()
            .into_iter()
            .map(|t| t.run_id)
            .collect();
        assert_eq!(runs, ["r2"]);
    }
}
