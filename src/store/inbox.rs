//! The inbox: accepted events whose pipeline run has not finished, so a kill -9 loses none.
//!
//! An event is filed in the same transaction as its dedupe claim ([`Store::accept`]), before
//! the platform is acknowledged, and taken out when its run ends ([`Store::inbox_done`]). A
//! crash in between leaves the row. Each row names the instance running it (its owner); once
//! that instance is gone (killed, stopped, or restarted as a new process) the instance serving
//! the account takes the row over and runs it again ([`Store::inbox_adopt`], counting each run
//! with [`Store::inbox_attempt`]).
//! Replies cannot double on that replay: each chunk's post is begun durably first
//! ([`Store::send_begin`]).

use std::sync::Arc;

use baton_contract::{ChatKey, InboundEvent};

use super::dedupe::{claim_key, dedupe_key, dedupe_scope};
use super::history;
use super::inbox_row::{self, InboxRowError, Stored};
use super::leases::{now_ms, sql as pick, with_clock};
use super::sql::{Db, DbError, Engine, OptionalRow, args};
use super::transcript::{insert_entry, meta_json};
use super::{
    Claim, DEDUPE_TTL_MS, HistoryEntry, NewDecision, NewEntry, Store, StoreError, decisions,
};

/// An event's row in the inbox, while its run is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxId(pub i64);

/// An event left in the inbox by a run that never finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// Its row.
    pub id: InboxId,
    /// The normalized event as filed: [`Unfinished::event`] reads it.
    pub row: Vec<u8>,
    /// How many times a start has run it again already.
    pub attempts: u32,
    /// The instance running it (`''`: nobody's, for the instance serving its account to take).
    pub owner: String,
    /// When it was filed (ms since the epoch).
    pub accepted_ms: i64,
}

impl Unfinished {
    /// The event, read back from its row.
    pub fn event(&self) -> Result<InboundEvent, InboxRowError> {
        inbox_row::decode(&self.row)
    }
}

/// An event ready to be filed: its account's dedupe scope, the id it is recognised by, and the
/// event in its row's form (`inbox_row.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filing {
    /// `<platform>:<account>`.
    pub scope: String,
    /// Its message id, as its dedupe key.
    pub key: String,
    /// The normalized event, as its row holds it.
    pub event: Vec<u8>,
}

impl Filing {
    /// `event`, filed under the account that receives it.
    pub fn of(event: &InboundEvent) -> Filing {
        Filing {
            scope: dedupe_scope(event.platform, &event.account),
            key: dedupe_key(event),
            event: inbox_row::encode(event),
        }
    }
}

/// The claim of `dedupe.rs` and the filing as one statement, for PostgreSQL: one round trip
/// to the server instead of two, on every event (`sql/postgres.rs`). The upsert returns a row
/// only when it recorded the key (it was new or expired), and the inbox row is made from it, so
/// a duplicate files nothing and returns no id. SQLite has no data-modifying `WITH`; there the
/// two statements cost no round trip.
const CLAIM_AND_FILE: &str = "WITH fresh AS (
        INSERT INTO dedupe (scope, key, seen_ms) VALUES (?1, ?2, ?3)
        ON CONFLICT (scope, key) DO UPDATE SET seen_ms = excluded.seen_ms
        WHERE dedupe.seen_ms <= ?4
        RETURNING 1)
    INSERT INTO inbox (account, event, accepted_ms, owner)
    SELECT CAST(?1 AS TEXT), CAST(?5 AS BYTEA), CAST(?3 AS BIGINT), CAST(?6 AS TEXT) FROM fresh
    RETURNING id";

/// Claim `filing` and file it as `owner`'s when fresh, inside a writer job. A duplicate keeps
/// `duplicate`, the decision on it, where there is one.
fn file(
    db: Db<'_>,
    filing: &Filing,
    owner: &str,
    now_ms: i64,
    duplicate: Option<&NewDecision>,
) -> Result<Option<InboxId>, DbError> {
    let id = claim_and_file(db, filing, owner, now_ms)?;
    if id.is_none()
        && let Some(decision) = duplicate
    {
        decisions::insert(db, decision)?;
    }
    Ok(id)
}

/// The claim and the filing: the filed row, or none for a duplicate.
fn claim_and_file(
    db: Db<'_>,
    filing: &Filing,
    owner: &str,
    now_ms: i64,
) -> Result<Option<InboxId>, DbError> {
    if db.engine() == Engine::Postgres {
        let id = db
            .query_row(
                CLAIM_AND_FILE,
                args![
                    &filing.scope,
                    &filing.key,
                    now_ms,
                    now_ms - DEDUPE_TTL_MS,
                    filing.event.as_slice(),
                    owner
                ],
                |row| row.get(0),
            )
            .optional()?;
        return Ok(id.map(InboxId));
    }
    if claim_key(db, &filing.scope, &filing.key, now_ms)? == Claim::Duplicate {
        return Ok(None);
    }
    let id = db
        .insert_id(
            "INSERT INTO inbox (account, event, accepted_ms, owner) VALUES (?1, ?2, ?3, ?4)",
            args![&filing.scope, filing.event.as_slice(), now_ms, owner],
        )?
        .ok_or(DbError::NoRows)?;
    Ok(Some(InboxId(id)))
}

/// The rows of account `?1` that no live instance runs: not `?2`'s (the caller's own are under
/// way), and their owner has no registration renewed within `?3` ms (it was killed, stopped, or
/// is a previous process of a restarted instance: owner '').
const ORPHANS: [&str; 2] = with_clock!(
    "SELECT id, owner FROM inbox WHERE account = ?1 AND owner <> ?2 AND NOT EXISTS \
     (SELECT 1 FROM instances WHERE instances.id = inbox.owner AND instances.renewed_ms > "
    NOW
    " - ?3) ORDER BY id"
);

/// Take `id` out of the inbox and keep the decision on its event, inside a writer job.
fn done(db: Db<'_>, id: InboxId, decision: Option<&NewDecision>) -> Result<(), DbError> {
    if let Some(decision) = decision {
        decisions::insert(db, decision)?;
    }
    db.execute_pipelined("DELETE FROM inbox WHERE id = ?1", args![id.0])
}

impl Store {
    /// [`Store::claim`] the event's `key` in `scope` and, when it is fresh, file `event` (its
    /// row, as [`Filing::of`] makes it) in the inbox, in one transaction. `None` is a duplicate.
    pub async fn accept(
        &self,
        scope: &str,
        key: &str,
        event: Vec<u8>,
        now_ms: i64,
    ) -> Result<Option<InboxId>, StoreError> {
        let filing = Filing {
            scope: scope.to_owned(),
            key: key.to_owned(),
            event,
        };
        self.file(filing, now_ms, None).await
    }

    /// [`Store::accept`] for an event already made a [`Filing`] (moved, not copied again). A
    /// duplicate keeps `duplicate`, the decision on it, in the same job.
    pub async fn file(
        &self,
        filing: Filing,
        now_ms: i64,
        duplicate: Option<NewDecision>,
    ) -> Result<Option<InboxId>, StoreError> {
        let owner = self.instance();
        self.write(move |db| file(db, &filing, &owner, now_ms, duplicate.as_ref()))
            .await
    }

    /// Append `post` (a delivered chunk's transcript entry) and file `handovers` (the same post
    /// as other accounts receive it) in one transaction, so no stop can separate the record of
    /// a post from its hand-over. Returns each hand-over's inbox row, `None` where that account
    /// already has the message (the platform delivered it first).
    pub async fn append_handing_over(
        &self,
        post: NewEntry,
        handovers: Vec<Filing>,
        now_ms: i64,
    ) -> Result<(i64, Vec<Option<InboxId>>), StoreError> {
        let meta = meta_json(&post)?;
        let owner = self.instance();
        let tails = self.tails();
        self.write(move |db| {
            let entry = insert_entry(db, &post, &meta, tails.as_deref())?;
            let filed = handovers
                .iter()
                .map(|filing| file(db, filing, &owner, now_ms, None))
                .collect::<Result<_, _>>()?;
            Ok((entry, filed))
        })
        .await
    }

    /// The event's run ended (answered, refused, or its failure recorded); `decision` says
    /// what became of it, kept in the same job.
    pub async fn inbox_done(
        &self,
        id: InboxId,
        decision: Option<NewDecision>,
    ) -> Result<(), StoreError> {
        self.write(move |db| done(db, id, decision.as_ref())).await
    }

    /// Make `ids` nobody's (their run ended while the store could not write), for
    /// [`Store::inbox_adopt`] to give them to the instance serving their account; a row already
    /// taken out or taken over is left alone.
    pub async fn inbox_hand_back(&self, ids: Vec<InboxId>) -> Result<(), StoreError> {
        let me = self.instance();
        self.write(move |db| {
            for id in &ids {
                db.execute(
                    "UPDATE inbox SET owner = '' WHERE id = ?1 AND owner = ?2",
                    args![id.0, &*me],
                )?;
            }
            Ok(())
        })
        .await
    }

    /// The event's run ended with its message kept as context: [`Store::history_push`] and
    /// [`Store::inbox_done`] in one job (chatter is never filed: [`Store::claim_as_history`]).
    /// A stop between the filing and this leaves the event filed, to be kept again (the push is
    /// idempotent per message).
    pub async fn inbox_done_as_history(
        &self,
        id: InboxId,
        chat_key: &ChatKey,
        entry: HistoryEntry,
        limit: usize,
        decision: Option<NewDecision>,
    ) -> Result<(), StoreError> {
        let trim = self.trim_due(chat_key, limit);
        let chat_key = chat_key.as_str().to_owned();
        self.write(move |db| {
            history::push(db, &chat_key, &entry, trim)?;
            done(db, id, decision.as_ref())
        })
        .await
    }

    /// [`Store::claim`] a message that needs no run (it wakes no bot and asks nothing of one)
    /// and, when it is fresh, keep it in its chat's history buffer when `limit` is not 0, in one
    /// transaction. It is never filed: once this commits there is nothing left to run, so a
    /// crash after it has nothing to run again. A duplicate keeps nothing in the buffer.
    /// `decision` is kept as it is when the message is fresh, and as a duplicate's otherwise.
    #[allow(
        clippy::too_many_arguments,
        reason = "one write's parts: the claim, the history entry and the decision"
    )]
    pub async fn claim_as_history(
        &self,
        scope: &str,
        key: &str,
        chat_key: &ChatKey,
        entry: HistoryEntry,
        limit: usize,
        now_ms: i64,
        decision: Option<NewDecision>,
    ) -> Result<Claim, StoreError> {
        let trim = self.trim_due(chat_key, limit);
        let (scope, key) = (scope.to_owned(), key.to_owned());
        let chat_key = chat_key.as_str().to_owned();
        self.write(move |db| {
            let claim = claim_key(db, &scope, &key, now_ms)?;
            if claim == Claim::Fresh && limit > 0 {
                history::push(db, &chat_key, &entry, trim)?;
            }
            if let Some(decision) = &decision {
                match claim {
                    Claim::Fresh => decisions::insert(db, decision)?,
                    Claim::Duplicate => decisions::insert(db, &decision.clone().duplicate(now_ms))?,
                }
            }
            Ok(claim)
        })
        .await
    }

    /// The events of `scope` (`<platform>:<account>`) left unfinished by an earlier process,
    /// oldest first.
    pub async fn inbox_left(&self, scope: &str) -> Result<Vec<Unfinished>, StoreError> {
        let scope = scope.to_owned();
        self.read(move |db| {
            db.query_map(
                "SELECT id, event, attempts, owner, accepted_ms FROM inbox WHERE account = ?1 \
                 ORDER BY id",
                args![&scope],
                |row| {
                    Ok(Unfinished {
                        id: InboxId(row.get(0)?),
                        row: row.get::<Stored>(1)?.0,
                        attempts: row.get(2)?,
                        owner: row.get(3)?,
                        accepted_ms: row.get(4)?,
                    })
                },
            )
        })
        .await
    }

    /// Take over the events of `scope` (`<platform>:<account>`) that no live instance runs, to
    /// run them again, oldest first: those of an instance whose registration was not renewed
    /// within `stale_ms` (killed, or stopped before they finished) and those a restarted
    /// instance's previous process left. Each row changes owner in one conditional update
    /// (still the owner it was read with), so of several instances taking over at once exactly
    /// one gets each event. Their dedupe claims stay: a redelivery is still a duplicate.
    ///
    /// The common case, nothing to take, is one read and no write.
    pub async fn inbox_adopt(
        &self,
        scope: &str,
        stale_ms: i64,
    ) -> Result<Vec<Unfinished>, StoreError> {
        let me = self.instance();
        let (scope, mine) = (scope.to_owned(), Arc::clone(&me));
        let orphans: Vec<(i64, String)> = self
            .read(move |db| {
                db.query_map(pick(db, ORPHANS), args![&scope, &*mine, stale_ms], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
            })
            .await?;
        if orphans.is_empty() {
            return Ok(Vec::new());
        }
        self.write(move |db| {
            let mut taken = Vec::new();
            for (id, owner) in &orphans {
                let row = db.query_map(
                    "UPDATE inbox SET owner = ?1 WHERE id = ?2 AND owner = ?3 \
                     RETURNING event, attempts, accepted_ms",
                    args![&*me, *id, owner],
                    |row| {
                        Ok(Unfinished {
                            id: InboxId(*id),
                            row: row.get::<Stored>(0)?.0,
                            attempts: row.get(1)?,
                            owner: me.to_string(),
                            accepted_ms: row.get(2)?,
                        })
                    },
                )?;
                taken.extend(row);
            }
            Ok(taken)
        })
        .await
    }

    /// Count one more run of a left-over event, committed before it starts, so an event that
    /// stops the gateway every time it runs is recognised; returns the runs counted so far.
    pub async fn inbox_attempt(&self, id: InboxId) -> Result<u32, StoreError> {
        self.write(move |db| {
            db.query_row(
                "UPDATE inbox SET attempts = attempts + 1 WHERE id = ?1 RETURNING attempts",
                args![id.0],
                |row| row.get(0),
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[tokio::test]
    async fn a_fresh_event_is_filed_and_a_duplicate_is_not() {
        for db in testing::engines().await {
            let store = db.open().await;
            let id = store
                .accept("slack:a", "m1", "{}".into(), 1)
                .await
                .unwrap()
                .expect("fresh");
            let again = store.accept("slack:a", "m1", "{}".into(), 2).await;
            assert_eq!(again.unwrap(), None);
            let left = store.inbox_left("slack:a").await.unwrap();
            assert_eq!(left.len(), 1, "the duplicate was not filed");
            assert_eq!((left[0].id, left[0].attempts), (id, 0));
        }
    }

    #[tokio::test]
    async fn a_post_and_its_hand_overs_are_recorded_together_and_survive_a_restart() {
        for db in testing::engines().await {
            let store = db.open().await;
            // Feishu delivered the post to `caid` already; `ada` has not seen it.
            store
                .accept("feishu:caid", "msg:om_1", "copy".into(), 1)
                .await
                .unwrap()
                .unwrap();
            let post = NewEntry {
                session: crate::session::test_key("s"),
                ts_ms: 2,
                kind: crate::store::EntryKind::Reply,
                speaker: "snark".into(),
                origin: crate::store::Origin::Bot,
                text: "hello".into(),
                platform_message_id: Some("om_1".into()),
                run_id: Some("run".into()),
                idempotency_key: Some("run#0".into()),
                meta: serde_json::Value::Null,
            };
            let to = |account: &str| Filing {
                scope: format!("feishu:{account}"),
                key: "msg:om_1".into(),
                event: format!("for {account}").into(),
            };
            let (_, filed) = store
                .append_handing_over(post, vec![to("caid"), to("ada")], 3)
                .await
                .unwrap();
            assert!(filed[0].is_none(), "caid had it: one event");
            assert!(filed[1].is_some());
            store.close().await.unwrap();

            // A stop right after the post: its record and its hand-over are both there.
            let store = db.open().await;
            assert_eq!(
                store.send_begin("run#0", 4).await.unwrap(),
                crate::store::SendStart::Delivered("om_1".into())
            );
            let left = store.inbox_left("feishu:ada").await.unwrap();
            assert_eq!(left.len(), 1);
            assert_eq!(left[0].row, b"for ada");
            let caid = store.inbox_left("feishu:caid").await.unwrap();
            assert_eq!(caid.len(), 1, "only Feishu's own copy");
        }
    }

    /// A line by `ann` as the history buffer keeps it.
    fn line(id: &str, text: &str) -> HistoryEntry {
        HistoryEntry {
            message_id: id.into(),
            sender_id: "U1".into(),
            speaker: "ann".into(),
            text: text.into(),
            ts_ms: 1,
        }
    }

    /// `slack:a` has nothing left in the inbox, and `chat`'s buffer holds the one line.
    async fn assert_only_kept(store: &Store, chat: &ChatKey, engine: &str) {
        let left = store.inbox_left("slack:a").await.unwrap();
        assert!(left.is_empty(), "{engine}: {left:?}");
        let take = crate::store::HistoryTake {
            chat_key: chat,
            bot: &"snark".parse().unwrap(),
            skip_sender: None,
            skip_message: None,
            limit: 10,
        };
        let kept = store.history_take(take).await.unwrap();
        let texts: Vec<&str> = kept.iter().map(|h| h.text.as_str()).collect();
        assert_eq!(texts, ["the deploy is at five"], "{engine}");
    }

    #[tokio::test]
    async fn chatter_done_as_history_leaves_the_inbox_and_is_in_the_buffer() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let id = store
                .accept("slack:a", "m1", "{}".into(), 1)
                .await
                .unwrap()
                .unwrap();
            let chat = ChatKey::new(baton_contract::Platform::Slack, &"C1".into(), None);
            store
                .inbox_done_as_history(id, &chat, line("m1", "the deploy is at five"), 50, None)
                .await
                .unwrap();
            store.close().await.unwrap();
            let store = db.open().await;
            assert_only_kept(&store, &chat, engine).await;
        }
    }

    /// Chatter claimed as history: kept once, durably, never filed; a redelivery keeps nothing
    /// more; a chat that keeps no history only claims it.
    #[tokio::test]
    async fn chatter_claimed_as_history_is_kept_once_and_never_filed() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let chat = ChatKey::new(baton_contract::Platform::Slack, &"C1".into(), None);
            let keep = |id: &'static str, text: &'static str, limit| {
                let (store, chat) = (&store, &chat);
                async move {
                    store
                        .claim_as_history("slack:a", id, chat, line(id, text), limit, 1, None)
                        .await
                        .unwrap()
                }
            };
            assert_eq!(keep("m1", "the deploy is at five", 50).await, Claim::Fresh);
            assert_eq!(
                keep("m1", "the deploy is at five", 50).await,
                Claim::Duplicate
            );
            assert_eq!(keep("m2", "not kept here", 0).await, Claim::Fresh);
            assert_eq!(keep("m2", "not kept here", 50).await, Claim::Duplicate);
            store.close().await.unwrap();
            let store = db.open().await;
            assert_only_kept(&store, &chat, engine).await;
        }
    }

    #[tokio::test]
    async fn a_dead_instances_events_are_taken_over_once_and_a_live_ones_are_not() {
        for db in testing::engines().await {
            let engine = db.engine();
            // Three processes on one database: a takes the events, b and c serve the account too.
            let (a, b, c) = (db.open().await, db.open().await, db.open().await);
            for (store, id) in [(&a, "a"), (&b, "b"), (&c, "c")] {
                store.instance_register(id, "0.1", 60_000).await.unwrap();
            }
            for key in ["m1", "m2"] {
                a.accept("slack:x", key, key.into(), 1)
                    .await
                    .unwrap()
                    .unwrap();
            }
            assert!(
                b.inbox_adopt("slack:x", 60_000).await.unwrap().is_empty(),
                "{engine}: a renewed within the lease: its events are under way"
            );
            assert!(
                a.inbox_adopt("slack:x", 60_000).await.unwrap().is_empty(),
                "{engine}: its own events are under way"
            );

            // a stops renewing (killed): its registration is now older than the lease, while b
            // and c renewed within it. They race for its events: each goes to exactly one.
            // (The time is moved, not waited for: with a short lease and real waits, a slow
            // run let a live instance's renewal look as old as a dead one's.)
            a.write(|db| {
                db.execute(
                    "UPDATE instances SET renewed_ms = renewed_ms - 120000 WHERE id = 'a'",
                    &[],
                )
            })
            .await
            .unwrap();
            let (by_b, by_c) = tokio::join!(
                b.inbox_adopt("slack:x", 60_000),
                c.inbox_adopt("slack:x", 60_000)
            );
            let (by_b, by_c) = (by_b.unwrap(), by_c.unwrap());
            let mut events: Vec<&[u8]> = by_b.iter().chain(&by_c).map(|u| &u.row[..]).collect();
            events.sort_unstable();
            assert_eq!(
                events,
                [b"m1", b"m2"],
                "{engine}: each taken once: {by_b:?} {by_c:?}"
            );
            for taken in [&by_b, &by_c] {
                let order: Vec<i64> = taken.iter().map(|u| u.id.0).collect();
                assert!(order.is_sorted(), "{engine}: oldest first: {order:?}");
            }
            for (store, id) in [(&b, "b"), (&c, "c")] {
                assert!(
                    store
                        .inbox_adopt("slack:x", 60_000)
                        .await
                        .unwrap()
                        .is_empty(),
                    "{engine}: {id}: the new owners are alive: nothing to take again"
                );
            }
            // A redelivery of a taken-over event, to any instance, is still a duplicate.
            for store in [&a, &b, &c] {
                let again = store.accept("slack:x", "m1", "m1".into(), 2).await;
                assert_eq!(again.unwrap(), None, "{engine}");
            }
            for (store, taken) in [(&b, by_b), (&c, by_c)] {
                for row in taken {
                    assert_eq!(row.attempts, 0, "{engine}");
                    store.inbox_done(row.id, None).await.unwrap();
                }
            }
            assert!(
                a.inbox_left("slack:x").await.unwrap().is_empty(),
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn a_row_handed_back_is_run_again_by_the_instance_serving_its_account() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store.instance_register("a", "0.1", 60_000).await.unwrap();
            let id = store
                .accept("slack:x", "m1", "m1".into(), 1)
                .await
                .unwrap()
                .unwrap();
            assert!(
                store
                    .inbox_adopt("slack:x", 60_000)
                    .await
                    .unwrap()
                    .is_empty(),
                "{engine}: under way here"
            );
            store.inbox_hand_back(vec![id]).await.unwrap();
            let taken = store.inbox_adopt("slack:x", 60_000).await.unwrap();
            let events: Vec<&[u8]> = taken.iter().map(|u| &u.row[..]).collect();
            assert_eq!(events, [b"m1"], "{engine}");
            // A row taken out meanwhile stays out.
            store.inbox_done(id, None).await.unwrap();
            store.inbox_hand_back(vec![id]).await.unwrap();
            assert!(
                store
                    .inbox_adopt("slack:x", 60_000)
                    .await
                    .unwrap()
                    .is_empty(),
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn a_restarted_instance_takes_back_what_its_previous_process_left() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store.instance_register("a", "0.1", 60_000).await.unwrap();
            store
                .accept("slack:x", "m1", "m1".into(), 1)
                .await
                .unwrap()
                .unwrap();
            store.close().await.unwrap();

            // The same id again, in a new process (killed, then restarted at once).
            let store = db.open().await;
            assert_eq!(
                store.instance_register("a", "0.1", 0).await.unwrap(),
                crate::store::Registered::Yes
            );
            let taken = store.inbox_adopt("slack:x", 60_000).await.unwrap();
            let events: Vec<&[u8]> = taken.iter().map(|u| &u.row[..]).collect();
            assert_eq!(events, [b"m1"], "{engine}");
            assert!(
                store
                    .inbox_adopt("slack:x", 60_000)
                    .await
                    .unwrap()
                    .is_empty(),
                "{engine}: taken once"
            );
            // Filed from now on: this process's own, under way.
            store
                .accept("slack:x", "m2", "m2".into(), 2)
                .await
                .unwrap()
                .unwrap();
            assert!(
                store
                    .inbox_adopt("slack:x", 60_000)
                    .await
                    .unwrap()
                    .is_empty(),
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn finished_runs_leave_nothing_and_attempts_are_counted_across_restarts() {
        for db in testing::engines().await {
            let store = db.open().await;
            let done = store
                .accept("slack:a", "m1", "1".into(), 1)
                .await
                .unwrap()
                .unwrap();
            store
                .accept("slack:a", "m2", "2".into(), 2)
                .await
                .unwrap()
                .unwrap();
            store
                .accept("discord:b", "m3", "3".into(), 3)
                .await
                .unwrap()
                .unwrap();
            store.inbox_done(done, None).await.unwrap();
            store.close().await.unwrap();

            let store = db.open().await;
            let left = store.inbox_left("slack:a").await.unwrap();
            assert_eq!(left.len(), 1);
            assert_eq!(left[0].row, b"2");
            assert_eq!(store.inbox_attempt(left[0].id).await.unwrap(), 1);
            store.close().await.unwrap();

            let store = db.open().await;
            let left = store.inbox_left("slack:a").await.unwrap();
            assert_eq!(left[0].attempts, 1, "the count survives a restart");
            assert_eq!(store.inbox_attempt(left[0].id).await.unwrap(), 2);
        }
    }
}
