//! The moves of a chain's turn: a handoff, a post, a hand-back, a close. Each is one writer job
//! that checks the chain's state, holder and turn number before it changes anything, and writes
//! its log entry in the same transaction, so a late arrival never moves the turn. With several
//! instances on one PostgreSQL, each job first makes itself exclusive for its chain
//! (`rows::lock`), so the check and the move stay one step there too.

use super::rows::{Note, by_id, lock, normalize, note, written};
use super::runner::ran_here;
use super::{BATON, Chain, ChainEntryKind, ChainState};
use crate::bot_id::BotId;
use crate::store::sql::{Db, DbError, args};
use crate::store::{Store, StoreError};

/// Why the store would not move a chain's turn. Each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// No chain has this id.
    #[error("no chain `{0}`; chain_status (or /baton chain status) lists the open ones")]
    Unknown(String),
    /// The chain is over.
    #[error("chain {id} is {state}; nothing more can be said or done in it")]
    Closed {
        /// The chain.
        id: String,
        /// How it ended.
        state: ChainState,
    },
    /// Someone else holds the turn.
    #[error(
        "it is not your turn in chain {id}: {holder} holds turn {turn}; wait until the \
         coordinator gives you the turn"
    )]
    NotHolder {
        /// The chain.
        id: String,
        /// Who holds it.
        holder: String,
        /// The turn number.
        turn: i64,
    },
    /// The coordinator tried to hand the turn on while a participant still holds it.
    #[error(
        "{holder} holds turn {turn} of chain {id}; the turn comes back to you when it posts or \
         its turn times out, then hand it on"
    )]
    TurnTaken {
        /// The chain.
        id: String,
        /// Who holds it.
        holder: String,
        /// The turn number.
        turn: i64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A handoff to make ([`Store::chain_hand`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The chain.
    pub chain: String,
    /// Who gives the turn (the coordinator's name).
    pub by: String,
    /// Who gets it.
    pub to: BotId,
    /// What they are asked.
    pub prompt: String,
    /// Add `to` to the participants first if it is not one (`chain_add`).
    pub add: bool,
    /// `[chains] max_rounds`: the handoff that would start a round past it closes the chain.
    pub max_rounds: u32,
}

/// What a handoff did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handed {
    /// `to` holds the turn now (the chain as it is after the move).
    Given(Chain),
    /// The handoff would have started a round past `max_rounds`: the chain is closed `capped`.
    Capped(Chain),
}

/// What a post did ([`Store::chain_post`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The chain as it is after the post.
    pub chain: Chain,
    /// The log entry's id.
    pub entry: i64,
    /// Whether the turn went back to the coordinator (it stays put when the coordinator posts).
    pub returned: bool,
}

/// The open chain `id`, or why there is none to act on; the rest of the job is exclusive for
/// it.
fn open_chain(db: Db<'_>, id: &str) -> Result<Result<Chain, ChainError>, DbError> {
    lock(db, id)?;
    Ok(match by_id(db, id)? {
        None => Err(ChainError::Unknown(id.to_owned())),
        Some(chain) if chain.state != ChainState::Open => Err(ChainError::Closed {
            id: chain.id,
            state: chain.state,
        }),
        Some(chain) => Ok(chain),
    })
}

/// Whether `bot` was given a turn since `round_turn` (it spoke in the current round).
fn had_turn_since(db: Db<'_>, chain: &str, bot: &str, since: i64) -> Result<bool, DbError> {
    db.query_row(
        "SELECT EXISTS (SELECT 1 FROM chain_messages
         WHERE chain = ?1 AND kind = 'handoff' AND recipient = ?2 AND turn >= ?3)",
        args![chain, bot, since],
        |r| r.get(0),
    )
}

/// Close `chain` (open, as read in this job) with `state`, noting `reason` as said by `by`.
fn close_in(
    db: Db<'_>,
    chain: &Chain,
    state: ChainState,
    by: &str,
    reason: &str,
    now_ms: i64,
) -> Result<Chain, DbError> {
    db.execute(
        "UPDATE chains SET state = ?2, holder = NULL, closed_reason = ?3, closed_ms = ?4
         WHERE id = ?1",
        args![&chain.id, state.as_str(), reason, now_ms],
    )?;
    let content = format!("chain {state} by {by}: {reason}");
    let entry = Note {
        turn: chain.turn,
        sender: BATON,
        kind: ChainEntryKind::System,
        content: &content,
        recipient: None,
    };
    note(db, &chain.id, entry, now_ms)?;
    written(db, &chain.id)
}

/// Give the turn of `chain` back to its coordinator.
fn hand_back(db: Db<'_>, chain: &str) -> Result<(), DbError> {
    db.execute(
        "UPDATE chains SET holder = coordinator, turn = turn + 1 WHERE id = ?1",
        args![chain],
    )
    .map(drop)
}

/// Flatten the result of a writer job that decides on a chain.
fn decided<T>(result: Result<Result<T, ChainError>, StoreError>) -> Result<T, ChainError> {
    result?
}

impl Store {
    /// Give the turn of an open chain to `handoff.to`, if the coordinator holds it. The handoff
    /// that would start a round past `max_rounds` closes the chain (`capped`) instead.
    pub async fn chain_hand(&self, handoff: Handoff, now_ms: i64) -> Result<Handed, ChainError> {
        let id = normalize(&handoff.chain);
        let me = self.instance();
        decided(
            self.write(move |db| {
                let mut chain = match open_chain(db, &id)? {
                    Ok(chain) => chain,
                    Err(refused) => return Ok(Err(refused)),
                };
                if !chain.coordinator_holds() {
                    return Ok(Err(ChainError::TurnTaken {
                        holder: chain.holder_name().to_owned(),
                        id: chain.id,
                        turn: chain.turn,
                    }));
                }
                if handoff.add && !chain.participants.contains(&handoff.to) {
                    chain.participants.push(handoff.to.clone());
                    let participants = serde_json::json!(chain.participants).to_string();
                    db.execute(
                        "UPDATE chains SET participants = ?2 WHERE id = ?1",
                        args![&chain.id, &participants],
                    )?;
                }
                let round_turn: i64 = db.query_row(
                    "SELECT round_turn FROM chains WHERE id = ?1",
                    args![&chain.id],
                    |r| r.get(0),
                )?;
                let turn = chain.turn + 1;
                let new_round = chain.round == 0
                    || had_turn_since(db, &chain.id, handoff.to.as_str(), round_turn)?;
                let (round, round_turn) = if new_round {
                    (chain.round + 1, turn)
                } else {
                    (chain.round, round_turn)
                };
                if round > handoff.max_rounds {
                    let reason = format!(
                        "the round cap ([chains] max_rounds = {}) was reached",
                        handoff.max_rounds
                    );
                    let closed = close_in(db, &chain, ChainState::Capped, BATON, &reason, now_ms)?;
                    return Ok(Ok(Handed::Capped(closed)));
                }
                db.execute(
                    "UPDATE chains SET holder = ?2, turn = ?3, round = ?4, round_turn = ?5
                     WHERE id = ?1",
                    args![&chain.id, &handoff.to, turn, round, round_turn],
                )?;
                let entry = Note {
                    turn,
                    sender: &handoff.by,
                    kind: ChainEntryKind::Handoff,
                    content: &handoff.prompt,
                    recipient: Some(handoff.to.as_str()),
                };
                note(db, &chain.id, entry, now_ms)?;
                ran_here(db, &chain.id, &me)?;
                Ok(Ok(Handed::Given(written(db, &chain.id)?)))
            })
            .await,
        )
    }

    /// Post `content` as `sender`, who must hold the turn. The turn then goes back to the
    /// coordinator (unless the coordinator itself posted).
    pub async fn chain_post(
        &self,
        chain: &str,
        sender: &BotId,
        content: &str,
        now_ms: i64,
    ) -> Result<Posted, ChainError> {
        let (id, sender, content) = (normalize(chain), sender.clone(), content.to_owned());
        let me = self.instance();
        decided(
            self.write(move |db| {
                let chain = match open_chain(db, &id)? {
                    Ok(chain) => chain,
                    Err(refused) => return Ok(Err(refused)),
                };
                if !chain.held_by(&sender) {
                    return Ok(Err(ChainError::NotHolder {
                        holder: chain.holder_name().to_owned(),
                        id: chain.id,
                        turn: chain.turn,
                    }));
                }
                let said = Note {
                    turn: chain.turn,
                    sender: sender.as_str(),
                    kind: ChainEntryKind::Message,
                    content: &content,
                    recipient: None,
                };
                let entry = note(db, &chain.id, said, now_ms)?;
                let returned = !chain.coordinator_holds();
                if returned {
                    hand_back(db, &chain.id)?;
                }
                ran_here(db, &chain.id, &me)?;
                let chain = written(db, &chain.id)?;
                Ok(Ok(Posted {
                    chain,
                    entry,
                    returned,
                }))
            })
            .await,
        )
    }

    /// Hand the turn back to the coordinator with a system note, if the chain is open and still
    /// at `turn` with a participant holding it; `None` when the turn already moved on (a post
    /// or a close won the race), so a late timeout changes nothing.
    pub async fn chain_return(
        &self,
        chain: &str,
        turn: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<Chain>, StoreError> {
        let (id, reason) = (normalize(chain), reason.to_owned());
        let me = self.instance();
        self.write(move |db| {
            let Ok(chain) = open_chain(db, &id)? else {
                return Ok(None);
            };
            if chain.turn != turn || chain.coordinator_holds() {
                return Ok(None);
            }
            let entry = Note {
                turn,
                sender: BATON,
                kind: ChainEntryKind::System,
                content: &reason,
                recipient: None,
            };
            note(db, &chain.id, entry, now_ms)?;
            hand_back(db, &chain.id)?;
            ran_here(db, &chain.id, &me)?;
            by_id(db, &chain.id)
        })
        .await
    }

    /// Close an open chain as `state`, noting who closed it and why. `Ok(None)` when it was
    /// already closed (closing twice is not an error: two people may say stop at once).
    /// With `at_turn`, close only if the chain is still at that turn (baton's own decisions,
    /// which a human's move since must win over).
    pub async fn chain_close(
        &self,
        chain: &str,
        close: ChainClose,
        now_ms: i64,
    ) -> Result<Option<Chain>, ChainError> {
        let id = normalize(chain);
        decided(
            self.write(move |db| {
                let chain = match open_chain(db, &id)? {
                    Ok(chain) => chain,
                    Err(ChainError::Closed { .. }) => return Ok(Ok(None)),
                    Err(refused) => return Ok(Err(refused)),
                };
                if close.at_turn.is_some_and(|turn| turn != chain.turn) {
                    return Ok(Ok(None));
                }
                let closed = close_in(db, &chain, close.state, &close.by, &close.reason, now_ms)?;
                Ok(Ok(Some(closed)))
            })
            .await,
        )
    }
}

/// How to close a chain ([`Store::chain_close`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainClose {
    /// The state it ends in.
    pub state: ChainState,
    /// Who closes it: a bot id, a human's id, or `baton`.
    pub by: String,
    /// Why, for the log.
    pub reason: String,
    /// Close only if the chain is still at this turn.
    pub at_turn: Option<i64>,
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{ChainOrigin, ChainQuery, Holder, NewChain};
    use super::*;
    use crate::store::testing;

    fn bot(name: &str) -> BotId {
        name.parse().unwrap()
    }

    pub(in crate::store::chains) fn new_chain(
        coordinator: Option<&str>,
        participants: &[&str],
    ) -> NewChain {
        NewChain {
            name: "launch review".into(),
            coordinator: coordinator.map(bot),
            participants: participants.iter().map(|p| bot(p)).collect(),
            origin: ChainOrigin {
                platform: baton_contract::Platform::Local,
                chat: "room".into(),
                thread: None,
                anchor: Some("m1".into()),
                account: "snark".into(),
            },
            started_by: "admin".into(),
            trigger: None,
        }
    }

    fn hand(chain: &Chain, to: &str, max_rounds: u32) -> Handoff {
        Handoff {
            chain: chain.id.clone(),
            by: chain.coordinator_name().to_owned(),
            to: bot(to),
            prompt: format!("{to}, your turn"),
            add: false,
            max_rounds,
        }
    }

    fn given(handed: Handed) -> Chain {
        match handed {
            Handed::Given(chain) => chain,
            Handed::Capped(chain) => panic!("capped: {chain:?}"),
        }
    }

    #[tokio::test]
    async fn only_the_holder_posts_and_the_turn_returns_to_the_coordinator() {
        for db in testing::engines().await {
            let store = db.open().await;
            let chain = store
                .create_chain(new_chain(Some("snark"), &["caid", "sec"]), 1)
                .await
                .unwrap();
            assert!(
                chain.id.starts_with("ch-") && chain.id.len() == 9,
                "{}",
                chain.id
            );
            assert_eq!(chain.holder.bot().map(BotId::as_str), Some("snark"));
            assert!(chain.coordinator_holds());

            let chain = given(store.chain_hand(hand(&chain, "caid", 10), 2).await.unwrap());
            assert_eq!(
                (
                    chain.holder.bot().map(BotId::as_str),
                    chain.turn,
                    chain.round
                ),
                (Some("caid"), 1, 1)
            );

            let err = store
                .chain_post(&chain.id, &bot("sec"), "me first", 3)
                .await;
            assert!(
                matches!(&err, Err(ChainError::NotHolder { holder, turn: 1, .. }) if holder == "caid"),
                "{err:?}"
            );
            let err = store
                .chain_hand(hand(&chain, "sec", 10), 3)
                .await
                .unwrap_err();
            assert!(matches!(err, ChainError::TurnTaken { .. }), "{err}");

            let posted = store
                .chain_post(&chain.id, &bot("caid"), "risk: none", 4)
                .await
                .unwrap();
            assert!(posted.returned);
            assert_eq!(posted.chain.holder.bot().map(BotId::as_str), Some("snark"));
            assert_eq!(posted.chain.turn, 2);
            // The coordinator may speak while it holds the turn; it keeps it.
            let own = store
                .chain_post(&chain.id, &bot("snark"), "thanks", 5)
                .await
                .unwrap();
            assert!(!own.returned);
            assert_eq!(own.chain.turn, 2);

            let log = store.chain_entries(&chain.id).await.unwrap();
            let kinds: Vec<_> = log.iter().map(|e| (e.kind, e.sender.as_str())).collect();
            assert_eq!(
                kinds,
                [
                    (ChainEntryKind::System, "baton"),
                    (ChainEntryKind::Handoff, "snark"),
                    (ChainEntryKind::Message, "caid"),
                    (ChainEntryKind::Message, "snark"),
                ]
            );
            assert_eq!(log[1].recipient.as_deref(), Some("caid"));
            assert_eq!(log[2].turn, 1);
        }
    }

    #[tokio::test]
    async fn a_stale_return_changes_nothing_and_a_fresh_one_hands_back() {
        for db in testing::engines().await {
            let store = db.open().await;
            let chain = store
                .create_chain(new_chain(Some("snark"), &["caid"]), 1)
                .await
                .unwrap();
            let chain = given(store.chain_hand(hand(&chain, "caid", 10), 2).await.unwrap());
            assert_eq!(
                store.chain_return(&chain.id, 0, "stale", 3).await.unwrap(),
                None
            );
            let back = store
                .chain_return(&chain.id, 1, "caid timed out", 3)
                .await
                .unwrap()
                .expect("handed back");
            assert_eq!(
                (back.holder.bot().map(BotId::as_str), back.turn),
                (Some("snark"), 2)
            );
            assert_eq!(
                store.chain_return(&chain.id, 1, "again", 4).await.unwrap(),
                None
            );
            let late = store.chain_post(&chain.id, &bot("caid"), "late", 5).await;
            assert!(
                matches!(late, Err(ChainError::NotHolder { .. })),
                "{late:?}"
            );
            let log = store.chain_entries(&chain.id).await.unwrap();
            assert_eq!(log.last().unwrap().kind, ChainEntryKind::System);
            assert_eq!(log.last().unwrap().content, "caid timed out");
        }
    }

    #[tokio::test]
    async fn rounds_end_when_a_speaker_comes_round_again_and_the_cap_closes() {
        for db in testing::engines().await {
            let store = db.open().await;
            let chain = store
                .create_chain(new_chain(None, &["a", "b"]), 1)
                .await
                .unwrap();
            assert_eq!(chain.holder, Holder::Baton);
            assert_eq!(chain.coordinator_name(), "baton");
            let mut rounds = Vec::new();
            for to in ["a", "b", "a", "b"] {
                let chain = given(store.chain_hand(hand(&chain, to, 2), 2).await.unwrap());
                rounds.push(chain.round);
                store
                    .chain_post(&chain.id, &bot(to), "said", 3)
                    .await
                    .unwrap();
            }
            assert_eq!(rounds, [1, 1, 2, 2]);
            let Handed::Capped(capped) = store.chain_hand(hand(&chain, "a", 2), 4).await.unwrap()
            else {
                panic!("a third round is past the cap");
            };
            assert_eq!(capped.state, ChainState::Capped);
            assert_eq!(capped.holder_name(), "nobody");
            assert!(capped.closed_reason.unwrap().contains("max_rounds = 2"));
            let after = store.chain_post(&chain.id, &bot("a"), "more", 5).await;
            assert!(
                matches!(
                    after,
                    Err(ChainError::Closed {
                        state: ChainState::Capped,
                        ..
                    })
                ),
                "{after:?}"
            );
        }
    }

    #[tokio::test]
    async fn close_is_once_adds_join_and_open_chains_are_found_by_chat() {
        for db in testing::engines().await {
            let store = db.open().await;
            let chain = store
                .create_chain(new_chain(Some("snark"), &[]), 1)
                .await
                .unwrap();
            let mut add = hand(&chain, "doc", 10);
            add.add = true;
            let chain = given(store.chain_hand(add, 2).await.unwrap());
            assert_eq!(chain.participants, ["doc"]);
            let open = ChainQuery {
                open_in: Some(("local".into(), "room".into())),
                limit: None,
            };
            assert_eq!(store.chains(open.clone()).await.unwrap().len(), 1);
            let stop = ChainClose {
                state: ChainState::Stopped,
                by: "admin".into(),
                reason: "enough".into(),
                at_turn: None,
            };
            let closed = store
                .chain_close(&chain.id.to_uppercase(), stop.clone(), 3)
                .await
                .unwrap()
                .expect("closed");
            assert_eq!(closed.state, ChainState::Stopped);
            assert_eq!(closed.closed_ms, Some(3));
            assert_eq!(store.chain_close(&chain.id, stop, 4).await.unwrap(), None);
            assert!(store.chains(open).await.unwrap().is_empty());
            assert_eq!(store.chains(ChainQuery::default()).await.unwrap().len(), 1);
            let unknown = store.chain_post("ch-nope22", &bot("doc"), "x", 5).await;
            assert!(
                matches!(unknown, Err(ChainError::Unknown(_))),
                "{unknown:?}"
            );
        }
    }

    /// A chain keeps the trigger of the turn that started it; one an admin's command started is
    /// a trigger of its own, named by its id.
    #[tokio::test]
    async fn a_chain_keeps_the_trigger_that_started_it() {
        for db in testing::engines().await {
            let store = db.open().await;
            let mut from_turn = new_chain(Some("snark"), &["doc"]);
            from_turn.trigger = Some("run-1".into());
            let chain = store.create_chain(from_turn, 1).await.unwrap();
            assert_eq!(chain.trigger.as_deref(), Some("run-1"));
            let chain = given(store.chain_hand(hand(&chain, "doc", 10), 2).await.unwrap());
            assert_eq!(chain.trigger.as_deref(), Some("run-1"));
            let by_command = store
                .create_chain(new_chain(None, &["doc"]), 3)
                .await
                .unwrap();
            assert_eq!(by_command.trigger.as_deref(), Some(by_command.id.as_str()));
            let read = store.chain(&by_command.id).await.unwrap().expect("stored");
            assert_eq!(read.trigger, by_command.trigger);
        }
    }

    /// Two instances on one PostgreSQL each run their own writer: timeouts handing one turn
    /// back on both at once, beside the holder's post, must move it once.
    #[tokio::test]
    async fn two_instances_never_both_move_one_turn() {
        let db = testing::TestDb::postgres().await;
        let stores = [db.open().await, db.open().await];
        for round in 0..10 {
            let chain = stores[0]
                .create_chain(new_chain(Some("snark"), &["caid"]), 1)
                .await
                .unwrap();
            let chain = given(
                stores[0]
                    .chain_hand(hand(&chain, "caid", 10), 2)
                    .await
                    .unwrap(),
            );
            let returns = (0..8).map(|i| stores[i % 2].chain_return(&chain.id, 1, "timed out", 3));
            let caid = bot("caid");
            let (returns, posted) = tokio::join!(
                futures::future::join_all(returns),
                stores[1].chain_post(&chain.id, &caid, "done", 3),
            );
            let moves = returns
                .into_iter()
                .filter(|r| r.as_ref().unwrap().is_some())
                .count()
                + usize::from(posted.is_ok());
            assert_eq!(moves, 1, "round {round}: one move of turn 1, not {moves}");
            let chain = stores[0].chain(&chain.id).await.unwrap().unwrap();
            assert_eq!(chain.turn, 2, "round {round}");
        }
    }
}
