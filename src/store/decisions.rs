//! Decisions: what the pipeline made of each inbound event, one row per event per bot
//! ([`NewDecision`]), so `baton why` and `GET /api/why` can tell later why a message was or
//! was not answered (SPEC section 13).
//!
//! A row is never a write of its own: it goes in the job that ends the event's run
//! ([`Store::inbox_done`], [`Store::inbox_done_as_history`]) or claims it
//! ([`Store::file`] for a duplicate, [`Store::claim_as_history`] for chatter). Rows go with
//! the transcripts they explain (`prune.rs`, `[retention] transcripts`).

use super::sessions::optional_session_column;
use super::sql::{Db, DbError, Row, args};
use super::stored_name::parse_column;
use super::{Delivery, Entry, Origin, Store, StoreError};
use crate::session::SessionKey;

stored_name! {
    /// The pipeline step that decided what became of an event.
    DecisionStep, "decision step" {
        /// Step 2: received before (a redelivery, a replay).
        Duplicate = "duplicate",
        /// Step 3: the bot's own message, or a line the gateway posted.
        OwnMessage = "self",
        /// Over the size the pipeline reads.
        Size = "size",
        /// Step 4: an admin command.
        Admin = "admin",
        /// Step 5: the chat or DM policy, or pairing.
        Policy = "policy",
        /// Step 5½: a human's answer to a bot's question.
        Answer = "answer",
        /// Step 6: not woken, or paused.
        Activation = "activation",
        /// Step 7: a bot's message that may not wake this bot.
        BotGuard = "bot_guard",
        /// Step 8: the sender is over the inbound rate.
        Rate = "rate",
        /// Step 9: the lane or session had its maximum of turns waiting.
        Lane = "lane",
        /// A budget was used up: the turn did not call the model.
        Budget = "budget",
        /// Steps 10 to 13: the bot's turn ran.
        Turn = "turn",
        /// Before the steps: an unknown account, a shutdown, a store that could not record it.
        Intake = "intake",
    }
}

stored_name! {
    /// What became of the event, as [`crate::dispatcher::Handled`] names it.
    DecisionOutcome, "decision outcome" {
        /// Received before.
        Duplicate = "duplicate",
        /// Stopped before any turn.
        Dropped = "dropped",
        /// Woke nobody: kept in the chat's history buffer.
        Buffered = "buffered",
        /// An admin command, answered without a model turn.
        Admin = "admin",
        /// An answer to a bot's question, routed back to it.
        Answered = "answered",
        /// The bot replied.
        Replied = "replied",
        /// The bot chose silence.
        Silent = "silent",
        /// The turn or its delivery failed.
        Failed = "failed",
    }
}

/// What the pipeline made of one event for one bot, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDecision {
    /// When it was decided, ms since the epoch.
    pub ts_ms: i64,
    /// The platform's name.
    pub platform: String,
    /// The account that received the event.
    pub account: String,
    /// That account's bot.
    pub bot: String,
    /// `<platform>:<chat>[:thread:<id>]`.
    pub chat: String,
    /// The platform's message id.
    pub message_id: String,
    /// The platform's event id, where it has one.
    pub event_id: Option<String>,
    /// Who sent it (`bot:<id>` for a bot).
    pub sender: String,
    /// The step that decided.
    pub step: DecisionStep,
    /// What became of the event.
    pub outcome: DecisionOutcome,
    /// Why, in words (`not mentioned`, `mentions only other bots`, a budget's name, ...).
    pub reason: String,
    /// The bot's session, when a turn ran.
    pub session: Option<SessionKey>,
    /// The turn's run id, when a turn ran (or began to wait for one).
    pub run_id: Option<String>,
    /// How long the turn waited for its lane and session, in ms.
    pub waited_ms: Option<i64>,
    /// The message itself, kept once per chat whichever bot's decision comes first.
    pub said: Said,
}

/// An inbound message as the room saw it: `baton export` gives every one with its author,
/// whether or not it woke a bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    /// When it was sent, by the platform's clock, ms since the epoch.
    pub ts_ms: i64,
    /// `<platform>:<chat>`, its threads included.
    pub room: String,
    /// The author's readable name.
    pub author_name: String,
    /// A person or a bot.
    pub origin: Origin,
    /// What it said.
    pub text: String,
}

impl NewDecision {
    /// The same event received again: a duplicate, decided at `ts_ms`.
    pub fn duplicate(self, ts_ms: i64) -> NewDecision {
        NewDecision {
            ts_ms,
            step: DecisionStep::Duplicate,
            outcome: DecisionOutcome::Duplicate,
            reason: "received before: a redelivery, handled once".into(),
            session: None,
            run_id: None,
            waited_ms: None,
            ..self
        }
    }
}

/// A stored decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Increasing: the order they were decided in.
    pub id: i64,
    /// What was decided.
    pub decided: NewDecision,
}

/// Write `decision` inside a writer job.
pub(super) fn insert(db: Db<'_>, decision: &NewDecision) -> Result<(), DbError> {
    let session = decision.session.as_ref().map(SessionKey::render);
    db.execute(
        "INSERT INTO decisions (ts_ms, platform, account, bot, chat, message_id, event_id,
                sender, step, outcome, reason, session, run_id, waited_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        args![
            decision.ts_ms,
            &decision.platform,
            &decision.account,
            &decision.bot,
            &decision.chat,
            &decision.message_id,
            &decision.event_id,
            &decision.sender,
            decision.step.as_str(),
            decision.outcome.as_str(),
            &decision.reason,
            session.as_deref(),
            &decision.run_id,
            decision.waited_ms,
        ],
    )
    .map(drop)?;
    let said = &decision.said;
    db.execute(
        "INSERT INTO room_messages (ts_ms, room, chat, message_id, author, author_name, origin,
                text)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (chat, message_id) DO NOTHING",
        args![
            said.ts_ms,
            &said.room,
            &decision.chat,
            &decision.message_id,
            &decision.sender,
            &said.author_name,
            said.origin.as_str(),
            &said.text,
        ],
    )
    .map(drop)
}

fn from_row(row: &Row<'_>) -> Result<Decision, DbError> {
    Ok(Decision {
        id: row.get(0)?,
        decided: NewDecision {
            ts_ms: row.get(1)?,
            platform: row.get(2)?,
            account: row.get(3)?,
            bot: row.get(4)?,
            chat: row.get(5)?,
            message_id: row.get(6)?,
            event_id: row.get(7)?,
            sender: row.get(8)?,
            step: parse_column(row, 9)?,
            outcome: parse_column(row, 10)?,
            reason: row.get(11)?,
            session: optional_session_column(row, 12)?,
            run_id: row.get(13)?,
            waited_ms: row.get(14)?,
            said: Said {
                ts_ms: row.get(15)?,
                room: row.get(16)?,
                author_name: row.get(17)?,
                origin: parse_column(row, 18)?,
                text: row.get(19)?,
            },
        },
    })
}

/// Which event's decisions to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionQuery {
    /// By the platform's message id.
    Message(String),
    /// By the platform's event id.
    Event(String),
}

/// One decision with what its turn left: the run's transcript entries (posts with their
/// platform message ids, tool calls, failures) and the deliveries it began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// The decision.
    pub decision: Decision,
    /// The turn's transcript entries, oldest first (none without a turn).
    pub entries: Vec<Entry>,
    /// The bot-to-bot deliveries the turn began, oldest first.
    pub deliveries: Vec<Delivery>,
}

const SELECT: &str = "SELECT d.id, d.ts_ms, platform, account, bot, d.chat, d.message_id,
        event_id, sender, step, outcome, reason, session, run_id, waited_ms,
        coalesce(m.ts_ms, 0), coalesce(m.room, ''), coalesce(m.author_name, ''),
        coalesce(m.origin, 'human'), coalesce(m.text, '')
    FROM decisions d
    LEFT JOIN room_messages m ON m.chat = d.chat AND m.message_id = d.message_id";

impl Store {
    /// Keep `decision` on its own, for a run that has no inbox row to take out.
    pub async fn decision_put(&self, decision: NewDecision) -> Result<(), StoreError> {
        self.write(move |db| insert(db, &decision)).await
    }

    /// Every decision on one event, in the order they were made, each with what its turn left.
    pub async fn decisions(&self, query: DecisionQuery) -> Result<Vec<Explained>, StoreError> {
        self.read(move |db| {
            let found = match &query {
                DecisionQuery::Message(id) => db.query_map(
                    &format!("{SELECT} WHERE d.message_id = ?1 ORDER BY d.id"),
                    args![id],
                    from_row,
                )?,
                DecisionQuery::Event(id) => db.query_map(
                    &format!(
                        "{SELECT} WHERE d.message_id IN \
                         (SELECT message_id FROM decisions WHERE event_id = ?1) ORDER BY d.id"
                    ),
                    args![id],
                    from_row,
                )?,
            };
            found
                .into_iter()
                .map(|decision| explain(db, decision))
                .collect()
        })
        .await
    }
}

/// `decision` with its turn's entries and deliveries.
fn explain(db: Db<'_>, decision: Decision) -> Result<Explained, DbError> {
    let (session, run) = (&decision.decided.session, &decision.decided.run_id);
    let (entries, deliveries) = match (session, run) {
        (Some(session), Some(run)) => (
            super::transcript::run_entries_in(db, &session.render(), run)?,
            super::trigger_deliveries::triggered_by(db, run)?,
        ),
        _ => (Vec::new(), Vec::new()),
    };
    Ok(Explained {
        decision,
        entries,
        deliveries,
    })
}

#[cfg(test)]
mod tests {
    use baton_contract::{ChatKey, Platform};

    use super::*;
    use crate::store::{Claim, HistoryEntry, PruneTable, testing};

    const DAY: i64 = 24 * 60 * 60 * 1000;

    fn decided(message: &str, step: DecisionStep, ts_ms: i64) -> NewDecision {
        NewDecision {
            ts_ms,
            platform: "slack".into(),
            account: "a".into(),
            bot: "snark".into(),
            chat: "slack:C1".into(),
            message_id: message.into(),
            event_id: Some(format!("Ev{message}")),
            sender: "U1".into(),
            step,
            outcome: DecisionOutcome::Buffered,
            reason: "not mentioned".into(),
            session: None,
            run_id: None,
            waited_ms: None,
            said: Said {
                ts_ms,
                room: "slack:C1".into(),
                author_name: "ann".into(),
                origin: Origin::Human,
                text: "the deploy is at five".into(),
            },
        }
    }

    fn line(id: &str) -> HistoryEntry {
        HistoryEntry {
            message_id: id.into(),
            sender_id: "U1".into(),
            speaker: "ann".into(),
            text: "the deploy is at five".into(),
            ts_ms: 1,
        }
    }

    /// A decision rides on the write that ends the run or claims the event: the run's end, a
    /// duplicate's claim, chatter's claim (fresh, then again as a duplicate). Read back by
    /// message or by event id, in order; gone with the transcripts' retention.
    #[tokio::test]
    async fn decisions_ride_on_the_runs_writes_and_go_with_the_transcripts() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let now = 10 * DAY;
            let filed = store
                .accept("slack:a", "msg:m1", b"m1".to_vec(), now)
                .await
                .unwrap()
                .unwrap();
            let jobs = store.jobs();
            let turn = decided("m1", DecisionStep::Turn, now);
            store.inbox_done(filed, Some(turn.clone())).await.unwrap();
            assert_eq!(store.jobs() - jobs, 1, "{engine}: no write of its own");
            let again = store
                .file(
                    crate::store::Filing {
                        scope: "slack:a".into(),
                        key: "msg:m1".into(),
                        event: b"m1".to_vec(),
                    },
                    now + 1,
                    Some(turn.clone().duplicate(now + 1)),
                )
                .await
                .unwrap();
            assert!(again.is_none(), "{engine}");

            let chat = ChatKey::new(Platform::Slack, &"C1".into(), None);
            let chatter = decided("m2", DecisionStep::Activation, now);
            for (at, claim) in [(now, Claim::Fresh), (now + 1, Claim::Duplicate)] {
                let claimed = store
                    .claim_as_history(
                        "slack:a",
                        "msg:m2",
                        &chat,
                        line("m2"),
                        10,
                        at,
                        Some(chatter.clone()),
                    )
                    .await
                    .unwrap();
                assert_eq!(claimed, claim, "{engine}");
            }

            let steps = |found: &[Explained]| -> Vec<DecisionStep> {
                found.iter().map(|e| e.decision.decided.step).collect()
            };
            let m1 = store
                .decisions(DecisionQuery::Message("m1".into()))
                .await
                .unwrap();
            assert_eq!(
                steps(&m1),
                [DecisionStep::Turn, DecisionStep::Duplicate],
                "{engine}"
            );
            assert_eq!(m1[0].decision.decided, turn, "{engine}: kept as given");
            let m2 = store
                .decisions(DecisionQuery::Event("Evm2".into()))
                .await
                .unwrap();
            assert_eq!(
                steps(&m2),
                [DecisionStep::Activation, DecisionStep::Duplicate],
                "{engine}"
            );
            assert_eq!(m2[0].decision.decided.reason, "not mentioned");

            store
                .prune(PruneTable::Transcripts, now + DAY, now + 3 * DAY)
                .await
                .unwrap();
            let gone = store
                .decisions(DecisionQuery::Message("m1".into()))
                .await
                .unwrap();
            assert!(gone.is_empty(), "{engine}: pruned with the transcripts");
        }
    }
}
