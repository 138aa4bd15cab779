//! Escalations: questions and approval requests bots put to the humans of the
//! conversation their work started from, and what became of each.
//!
//! A row is created before the question is posted (its id is part of the posted text), and it
//! moves out of `pending` exactly once. Every move is a single `UPDATE ... WHERE state =
//! 'pending'` on the writer, because the same human message reaches every bot account in the
//! chat and each of them asks "is this an answer?" at the same time: the first one gets the
//! question, the others learn that their copy was already used ([`AnswerMatch::Copy`]).
//!
//! Ids are short (`q-` or `ap-` and six characters without look-alikes) because people type
//! them: `/baton approve ap-7kq2xd`.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use rand::Rng;
use serde::Serialize;

use super::notices::{Notice, Topic, announce_in};
use super::sessions::session_column;
use super::sql::{Db, DbError, Engine, OptionalRow, Row, args};
use super::stored_name::parse_column;
use super::{Store, StoreError};
use crate::bot_id::BotId;
use crate::session::SessionKey;
use baton_contract::ChatKey;

/// Characters an id is made of after its prefix: lowercase letters and digits, minus
/// look-alikes (`0`/`o`, `1`/`l`/`i`).
const ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
/// Characters after the prefix.
const ID_LEN: usize = 6;

stored_name! {
    /// What a bot asked for.
    EscalationKind, "escalation kind" {
        /// A question; the human's next message in the conversation answers it.
        Question = "question",
        /// An approve/deny decision, made with `/baton approve|deny` or `resolve_agent_approval`.
        Approval = "approval",
    }
}

stored_name! {
    /// Where an escalation stands.
    EscalationState, "escalation state" {
        /// Posted (or being posted), waiting for the human side.
        Pending = "pending",
        /// A question a human answered.
        Answered = "answered",
        /// An approval request that was approved.
        Approved = "approved",
        /// An approval request that was denied.
        Denied = "denied",
        /// The question could not be posted, or the A2A task it was asked in was canceled;
        /// nobody will answer it.
        Failed = "failed",
    }
}

impl EscalationKind {
    /// The id prefix, which tells people which command answers it.
    fn prefix(self) -> &'static str {
        match self {
            EscalationKind::Question => "q",
            EscalationKind::Approval => "ap",
        }
    }
}

/// An escalation to record (the store assigns the id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewEscalation {
    /// Question or approval request.
    pub kind: EscalationKind,
    /// The asking bot.
    pub bot: BotId,
    /// The asking bot's session: where the answer is delivered.
    pub session: SessionKey,
    /// The session whose chat the question is posted to.
    pub origin: SessionKey,
    /// The origin's chat key: where answers are looked for.
    pub chat_key: ChatKey,
    /// What the bot asked, as it wrote it.
    pub text: String,
}

/// A stored escalation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Escalation {
    /// `q-xxxxxx` or `ap-xxxxxx`.
    pub id: String,
    /// Question or approval request.
    pub kind: EscalationKind,
    /// The asking bot.
    pub bot: BotId,
    /// The asking bot's session.
    pub session: SessionKey,
    /// The session whose chat the question was posted to.
    pub origin: SessionKey,
    /// The origin's chat key (read back from the origin, which it is always built from).
    pub chat_key: ChatKey,
    /// The platform's id of the posted question, once posted.
    pub posted_message_id: Option<String>,
    /// What the bot asked.
    pub text: String,
    /// Where it stands.
    pub state: EscalationState,
    /// The human's answer, the approval note, or why posting failed.
    pub answer: Option<String>,
    /// Who resolved it: a human's id, or `bot:<id>`.
    pub answered_by: Option<String>,
    /// The platform's id of the message that answered a question.
    pub answer_message_id: Option<String>,
    /// When it was asked, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it left `pending`.
    pub resolved_ms: Option<i64>,
}

/// A human message that may answer a pending question ([`Store::answer_escalation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerCandidate {
    /// The chat, whatever thread the message is in (a key without a thread).
    pub chat: ChatKey,
    /// Where exactly it was said.
    pub chat_key: ChatKey,
    /// The message it replies to, if the platform says.
    pub reply_to: Option<String>,
    /// Its platform id.
    pub message_id: String,
    /// When it was sent (platform time, ms); 0 when unknown.
    pub sent_ms: i64,
    /// Who wrote it (human id).
    pub by: String,
    /// The text: the answer.
    pub text: String,
}

/// What a human message turned out to be for the pending questions of its chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerMatch {
    /// It answers this question, which is now `answered`: route the answer back.
    First(Escalation),
    /// It already answered this question through another bot account: drop this copy.
    Copy(Escalation),
}

/// Which escalations to list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EscalationQuery {
    /// Only those in this state.
    pub state: Option<EscalationState>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<usize>,
}

const SELECT: &str =
    "SELECT id, kind, bot, session, origin, chat_key, posted_message_id, text, state,
        answer, answered_by, answer_message_id, created_ms, resolved_ms
     FROM escalations";

/// Columns in [`SELECT`] order, for `RETURNING`. The origin is read from its key; its parts
/// (`origin_platform`, `origin_chat`, ...) are written for the lookups by chat.
const COLUMNS: &str = "id, kind, bot, session, origin, chat_key, posted_message_id, text, state,
        answer, answered_by, answer_message_id, created_ms, resolved_ms";

fn escalation_from_row(row: &Row<'_>) -> Result<Escalation, DbError> {
    let origin: SessionKey = session_column(row, 4)?;
    Ok(Escalation {
        id: row.get(0)?,
        kind: parse_column(row, 1)?,
        bot: row.get(2)?,
        session: session_column(row, 3)?,
        chat_key: origin.chat_key(),
        origin,
        posted_message_id: row.get(6)?,
        text: row.get(7)?,
        state: parse_column(row, 8)?,
        answer: row.get(9)?,
        answered_by: row.get(10)?,
        answer_message_id: row.get(11)?,
        created_ms: row.get(12)?,
        resolved_ms: row.get(13)?,
    })
}

/// An id as people type it: spaces and case do not matter.
fn normalize(id: &str) -> String {
    id.trim().to_ascii_lowercase()
}

/// A fresh id for `kind`: `q-` or `ap-` and [`ID_LEN`] characters of [`ID_ALPHABET`].
fn new_id(kind: EscalationKind) -> String {
    let mut rng = rand::rng();
    let tail: String = (0..ID_LEN)
        .map(|_| char::from(ID_ALPHABET[rng.random_range(0..ID_ALPHABET.len())]))
        .collect();
    format!("{}-{tail}", kind.prefix())
}

fn by_id(db: Db<'_>, id: &str) -> Result<Option<Escalation>, DbError> {
    db.query_row(
        &format!("{SELECT} WHERE id = ?1"),
        args![id],
        escalation_from_row,
    )
    .optional()
}

/// The chats (`<platform>:<chat>`) with at least one escalation, in any state.
///
/// Every human message asks whether it answers a question of its chat, and nearly every chat
/// has never had one: this set, loaded at open and extended right after each new escalation
/// commits (before the question is posted, so before anyone can answer it), settles those
/// messages without a database read. It only grows, and only by chats where a bot escalated:
/// pruning settled rows (`[retention] escalations`) leaves their chats in it until the next
/// start, which costs such a chat one read per message, never a missed answer.
///
/// On PostgreSQL, other instances sharing the database add escalations too: each announces its
/// chat, and [`Store::follow_escalation_chats`] adds it here, reloading the whole set when
/// notices may have been missed. The notice goes out at the escalation's commit, before the
/// question is posted, so it is here long before a person has read the question and answered.
#[derive(Debug, Default)]
pub(crate) struct EscalationChats {
    chats: RwLock<HashSet<String>>,
}

impl EscalationChats {
    /// Loads every chat that has an escalation.
    pub(crate) fn load(db: Db<'_>) -> Result<Self, DbError> {
        let chats = db.query_map(
            "SELECT DISTINCT origin_platform || ':' || origin_chat FROM escalations",
            &[],
            |r| r.get(0),
        )?;
        Ok(EscalationChats {
            chats: RwLock::new(chats.into_iter().collect()),
        })
    }

    /// Whether `chat` may have an escalation: one created here, found at open, or announced.
    fn may_have(&self, chat: &str) -> bool {
        let chats = self.chats.read().unwrap_or_else(|p| p.into_inner());
        chats.contains(chat)
    }

    fn insert(&self, chat: String) {
        let mut chats = self.chats.write().unwrap_or_else(|p| p.into_inner());
        chats.insert(chat);
    }

    /// Takes in every chat of `fresh` (a reload never forgets a chat known here).
    fn extend(&self, fresh: EscalationChats) {
        let fresh = fresh.chats.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut chats = self.chats.write().unwrap_or_else(|p| p.into_inner());
        chats.extend(fresh);
    }
}

impl Store {
    /// Records a new pending escalation with a fresh id and returns it, once committed.
    pub async fn create_escalation(
        &self,
        new: NewEscalation,
        now_ms: i64,
    ) -> Result<Escalation, StoreError> {
        let chats = Arc::clone(&self.inner.escalation_chats);
        let work = move |db: Db<'_>| {
            let o = &new.origin;
            // A taken id (one in a billion) is drawn again; the insert itself decides, so two
            // instances sharing the database cannot both take one.
            loop {
                let id = new_id(new.kind);
                let created = db
                    .query_row(
                        &format!(
                            "INSERT INTO escalations (id, kind, bot, session, origin, origin_bot,
                                origin_platform, origin_account, origin_chat, origin_thread,
                                chat_key, text, state, created_ms)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
                                'pending', ?13)
                             ON CONFLICT (id) DO NOTHING
                             RETURNING {COLUMNS}"
                        ),
                        args![
                            &id,
                            new.kind.as_str(),
                            new.bot.as_str(),
                            new.session.render().as_str(),
                            o.render().as_str(),
                            o.bot.as_str(),
                            o.platform.as_str(),
                            o.account.as_str(),
                            o.chat.as_str(),
                            o.thread.as_ref().map(|t| t.as_str()),
                            new.chat_key.as_str(),
                            &new.text,
                            now_ms,
                        ],
                        escalation_from_row,
                    )
                    .optional()?;
                if let Some(escalation) = created {
                    announce_in(db, Topic::Escalation, &chat_of(&escalation))?;
                    return Ok(escalation);
                }
            }
        };
        self.write_then(work, move |escalation: &Escalation| {
            chats.insert(chat_of(escalation));
        })
        .await
    }

    /// Until the store is dropped: keeps this instance's set of chats with escalations up with
    /// the ones other instances create ([`EscalationChats`]). On SQLite there are no others, and
    /// it returns at once.
    pub async fn follow_escalation_chats(&self) {
        if self.engine() == Engine::Sqlite {
            return;
        }
        let mut notices = self.subscribe();
        // What was created between the open and this subscription is read once now.
        let mut missed = true;
        loop {
            if missed {
                match self.read(EscalationChats::load).await {
                    Ok(fresh) => self.inner.escalation_chats.extend(fresh),
                    Err(err) => {
                        tracing::error!(%err, "could not read the chats with escalations; a question another instance asks is recognised after the next notice or a restart")
                    }
                }
            }
            missed = match notices.next().await {
                Notice::Changed {
                    topic: Topic::Escalation,
                    key,
                } => {
                    self.inner.escalation_chats.insert(key);
                    false
                }
                Notice::Changed { .. } => false,
                Notice::Missed => true,
            };
        }
    }

    /// Remembers the platform id of the posted question, so a reply to it is recognised.
    pub async fn escalation_posted(&self, id: &str, message_id: &str) -> Result<(), StoreError> {
        let (id, message_id) = (normalize(id), message_id.to_owned());
        self.write(move |db| {
            db.execute(
                "UPDATE escalations SET posted_message_id = ?2 WHERE id = ?1",
                args![&id, &message_id],
            )?;
            Ok(())
        })
        .await
    }

    /// One escalation by id (case and surrounding spaces ignored).
    pub async fn escalation(&self, id: &str) -> Result<Option<Escalation>, StoreError> {
        let id = normalize(id);
        self.read(move |db| by_id(db, &id)).await
    }

    /// Escalations, newest first.
    pub async fn escalations(&self, query: EscalationQuery) -> Result<Vec<Escalation>, StoreError> {
        let limit = query.limit.unwrap_or(usize::MAX);
        let state = query.state.map(EscalationState::as_str);
        self.read(move |db| {
            // The first `limit` rows are taken here rather than with `LIMIT ?` (`query_take`).
            db.query_take(
                &format!(
                    "{SELECT} WHERE CAST(?1 AS TEXT) IS NULL OR state = ?1
                     ORDER BY created_ms DESC, id"
                ),
                args![state],
                limit,
                escalation_from_row,
            )
        })
        .await
    }

    /// The oldest pending escalation asked in `origin` exactly (its chat and thread): what an
    /// A2A task waits on (`SessionKey::a2a_task`).
    pub async fn pending_escalation_in(
        &self,
        origin: &SessionKey,
    ) -> Result<Option<Escalation>, StoreError> {
        let origin = origin.clone();
        self.read(move |db| {
            db.query_row(
                &format!(
                    "{SELECT} WHERE state = 'pending' AND origin_platform = ?1
                       AND origin_chat = ?2 AND origin = ?3
                     ORDER BY created_ms, id LIMIT 1"
                ),
                args![
                    origin.platform.as_str(),
                    origin.chat.as_str(),
                    origin.render().as_str()
                ],
                escalation_from_row,
            )
            .optional()
        })
        .await
    }

    /// Moves a *pending* escalation to `state`, recording `answer` (the answer, a note, or why
    /// it failed) and who decided. `None` when there is no such escalation or it is no longer
    /// pending: of two callers racing, exactly one gets `Some`.
    pub async fn resolve_escalation(
        &self,
        id: &str,
        state: EscalationState,
        answer: Option<&str>,
        by: &str,
        now_ms: i64,
    ) -> Result<Option<Escalation>, StoreError> {
        let id = normalize(id);
        let (answer, by) = (answer.map(str::to_owned), by.to_owned());
        self.write(move |db| {
            db.query_row(
                &format!(
                    "UPDATE escalations
                     SET state = ?2, answer = ?3, answered_by = ?4, resolved_ms = ?5
                     WHERE id = ?1 AND state = 'pending'
                     RETURNING {COLUMNS}"
                ),
                args![&id, state.as_str(), &answer, &by, now_ms],
                escalation_from_row,
            )
            .optional()
        })
        .await
    }

    /// Whether `chat` may have a question to answer, without touching the database: false for
    /// a chat that never had an escalation. Every human message asks, so a caller can skip
    /// building its [`AnswerCandidate`] (a copy of the message) where nothing can match.
    pub fn may_have_escalation(&self, chat: &ChatKey) -> bool {
        self.inner.escalation_chats.may_have(chat.as_str())
    }

    /// Whether the human message `candidate` answers a pending question of its chat, and if so
    /// marks that question answered (atomically) and returns it.
    ///
    /// A message answers a question posted in its chat when, in this order of preference:
    /// 1. it replies to the posted question;
    /// 2. it is in the thread the question was posted in, or in a thread opened under it;
    /// 3. it carries no reply reference and was said, after the question, in the very chat (and
    ///    thread) the question was posted to: the next human message there.
    ///
    /// Among several matching questions the oldest is answered first. A message that already
    /// answered a question (a copy received through another bot account) is
    /// [`AnswerMatch::Copy`].
    pub async fn answer_escalation(
        &self,
        candidate: AnswerCandidate,
        now_ms: i64,
    ) -> Result<Option<AnswerMatch>, StoreError> {
        // Every human message in every chat comes through here, once per bot account. A chat
        // that never had an escalation has nothing to answer; in the others, ask a reader
        // first, so the writer is only bothered in chats with something to answer.
        if !self.may_have_escalation(&candidate.chat) {
            return Ok(None);
        }
        let probe = candidate.clone();
        let relevant = self
            .read(move |db| {
                db.query_row(
                    "SELECT EXISTS (SELECT 1 FROM escalations
                        WHERE origin_platform || ':' || origin_chat = ?1
                          AND (state = 'pending' OR answer_message_id = ?2))",
                    args![probe.chat.as_str(), &probe.message_id],
                    |r| r.get::<bool>(0),
                )
            })
            .await?;
        if !relevant {
            return Ok(None);
        }
        self.write(move |db| answer_in(db, &candidate, now_ms))
            .await
    }
}

/// The chat an escalation was asked in, as [`EscalationChats`] keys it.
fn chat_of(escalation: &Escalation) -> String {
    let origin = &escalation.origin;
    format!("{}:{}", origin.platform, origin.chat)
}

/// [`Store::answer_escalation`] on the writer.
fn answer_in(db: Db<'_>, c: &AnswerCandidate, now_ms: i64) -> Result<Option<AnswerMatch>, DbError> {
    if let Some(escalation) = answered_by(db, c)? {
        return Ok(Some(AnswerMatch::Copy(escalation)));
    }
    let found: Option<String> = db
        .query_row(
            "SELECT id FROM escalations
             WHERE state = 'pending' AND kind = 'question'
               AND origin_platform || ':' || origin_chat = ?1
               AND (
                    (CAST(?3 AS TEXT) IS NOT NULL AND posted_message_id = ?3)
                 OR (posted_message_id IS NOT NULL
                     AND ?2 = chat_key || ':thread:' || posted_message_id)
                 OR (?2 = chat_key
                     AND (origin_thread IS NOT NULL OR ?3 IS NULL)
                     AND (CAST(?4 AS BIGINT) = 0 OR ?4 >= created_ms))
               )
             ORDER BY CASE WHEN posted_message_id = ?3 THEN 1 ELSE 0 END DESC, created_ms, id
             LIMIT 1",
            args![c.chat.as_str(), c.chat_key.as_str(), &c.reply_to, c.sent_ms],
            |r| r.get(0),
        )
        .optional()?;
    let Some(id) = found else {
        return Ok(None);
    };
    let answered = db
        .query_row(
            &format!(
                "UPDATE escalations
                 SET state = 'answered', answer = ?2, answered_by = ?3, answer_message_id = ?4,
                     resolved_ms = ?5
                 WHERE id = ?1 AND state = 'pending'
                 RETURNING {COLUMNS}"
            ),
            args![&id, &c.text, &c.by, &c.message_id, now_ms],
            escalation_from_row,
        )
        .optional()?;
    match answered {
        Some(escalation) => Ok(Some(AnswerMatch::First(escalation))),
        // Resolved meanwhile by another instance sharing the database (the writer of one
        // instance never gets here): by this very message through another account, or not.
        None => Ok(answered_by(db, c)?.map(AnswerMatch::Copy)),
    }
}

/// The question `c` already answered (through another bot account), if any.
fn answered_by(db: Db<'_>, c: &AnswerCandidate) -> Result<Option<Escalation>, DbError> {
    db.query_row(
        &format!(
            "{SELECT} WHERE answer_message_id = ?2 AND origin_platform || ':' || origin_chat = ?1"
        ),
        args![c.chat.as_str(), &c.message_id],
        escalation_from_row,
    )
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::eventually;
    use crate::store::testing;

    fn origin(thread: Option<&str>) -> SessionKey {
        SessionKey {
            bot: "alpha".parse().unwrap(),
            platform: baton_contract::Platform::Slack,
            account: "alpha".into(),
            chat: "C1".into(),
            thread: thread.map(Into::into),
        }
    }

    fn question(kind: EscalationKind, thread: Option<&str>) -> NewEscalation {
        let chat_key = origin(thread).chat_key();
        NewEscalation {
            kind,
            bot: "beta".parse().unwrap(),
            session: "bot:beta:slack:beta:C9".parse().unwrap(),
            origin: origin(thread),
            chat_key,
            text: "which branch?".into(),
        }
    }

    /// `question` asked at `at_ms` and recorded.
    async fn ask(
        store: &Store,
        kind: EscalationKind,
        thread: Option<&str>,
        at_ms: i64,
    ) -> Escalation {
        store
            .create_escalation(question(kind, thread), at_ms)
            .await
            .unwrap()
    }

    /// A human message in `slack:C1` (thread `thread`), sent at 2000.
    fn said(id: &str, thread: Option<&str>, reply_to: Option<&str>) -> AnswerCandidate {
        AnswerCandidate {
            chat: origin(None).chat_key(),
            chat_key: origin(thread).chat_key(),
            reply_to: reply_to.map(str::to_owned),
            message_id: id.into(),
            sent_ms: 2_000,
            by: "U1".into(),
            text: "main".into(),
        }
    }

    async fn answered(store: &Store, c: AnswerCandidate) -> Option<String> {
        match store.answer_escalation(c, 3_000).await.unwrap() {
            Some(AnswerMatch::First(e)) => Some(e.id),
            Some(AnswerMatch::Copy(e)) => Some(format!("copy:{}", e.id)),
            None => None,
        }
    }

    /// On PostgreSQL a question asked through another instance is known here: one asked
    /// before this instance followed is read when it starts following, one asked after
    /// arrives by its notice; its answer is then recognised here.
    #[tokio::test]
    async fn a_question_another_instance_asks_is_answered_here() {
        let db = testing::TestDb::postgres().await;
        let (asker, here) = (db.open().await, db.open().await);
        let first = ask(&asker, EscalationKind::Question, None, 1_000).await;
        let c1 = origin(None).chat_key();
        assert!(!here.may_have_escalation(&c1), "opened before it was asked");

        let follower = tokio::spawn({
            let here = here.clone();
            async move { here.follow_escalation_chats().await }
        });
        eventually("the question asked before is read", || async {
            here.may_have_escalation(&c1)
        })
        .await;
        let mut later = question(EscalationKind::Question, None);
        later.origin.chat = "C2".into();
        later.chat_key = later.origin.chat_key();
        let c2 = later.chat_key.clone();
        asker.create_escalation(later, 1_500).await.unwrap();
        eventually("the question asked after is announced", || async {
            here.may_have_escalation(&c2)
        })
        .await;
        assert_eq!(
            answered(&here, said("m1", None, None)).await,
            Some(first.id)
        );
        follower.abort();
    }

    #[test]
    fn names_round_trip() {
        for &state in EscalationState::ALL {
            assert_eq!(state.as_str().parse::<EscalationState>(), Ok(state));
        }
        let err = "maybe".parse::<EscalationState>().unwrap_err();
        assert_eq!(err, "unknown stored escalation state 'maybe'");
    }

    #[tokio::test]
    async fn the_question_pending_in_an_exact_thread_is_found_and_no_longer_once_answered() {
        for db in testing::engines().await {
            let store = db.open().await;
            let q = ask(&store, EscalationKind::Question, Some("t1"), 1_000).await;
            ask(&store, EscalationKind::Question, None, 1_100).await;
            let found = store
                .pending_escalation_in(&origin(Some("t1")))
                .await
                .unwrap();
            assert_eq!(found.map(|e| e.id), Some(q.id.clone()));
            assert_eq!(
                store
                    .pending_escalation_in(&origin(Some("t2")))
                    .await
                    .unwrap(),
                None
            );
            assert_eq!(
                answered(&store, said("m1", Some("t1"), None)).await,
                Some(q.id)
            );
            assert_eq!(
                store
                    .pending_escalation_in(&origin(Some("t1")))
                    .await
                    .unwrap(),
                None
            );
        }
    }

    #[tokio::test]
    async fn ids_are_short_prefixed_and_found_however_typed() {
        for db in testing::engines().await {
            let store = db.open().await;
            let q = ask(&store, EscalationKind::Question, None, 1_000).await;
            let ap = ask(&store, EscalationKind::Approval, None, 1_000).await;
            assert!(q.id.starts_with("q-") && q.id.len() == 8, "{}", q.id);
            assert!(ap.id.starts_with("ap-") && ap.id.len() == 9, "{}", ap.id);
            assert!(ap.id[3..].bytes().all(|b| ID_ALPHABET.contains(&b)));
            assert_eq!(q.state, EscalationState::Pending);
            assert_eq!(q.origin, origin(None));
            let typed = format!(" {} ", ap.id.to_uppercase());
            assert_eq!(store.escalation(&typed).await.unwrap(), Some(ap.clone()));
            let pending = EscalationQuery {
                state: Some(EscalationState::Pending),
                limit: None,
            };
            assert_eq!(store.escalations(pending).await.unwrap().len(), 2);
        }
    }

    #[tokio::test]
    async fn resolve_moves_a_pending_row_once() {
        for db in testing::engines().await {
            let store = db.open().await;
            let ap = ask(&store, EscalationKind::Approval, None, 1_000).await;
            let approve = store.resolve_escalation(
                &ap.id,
                EscalationState::Approved,
                Some("ship it"),
                "U1",
                2_000,
            );
            let deny = store.resolve_escalation(&ap.id, EscalationState::Denied, None, "U2", 2_000);
            let (approve, deny) = tokio::join!(approve, deny);
            let winners: Vec<Escalation> = [approve.unwrap(), deny.unwrap()]
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(winners.len(), 1, "both racers resolved it");
            let stored = store.escalation(&ap.id).await.unwrap().unwrap();
            assert_eq!(stored, winners[0]);
            assert_eq!(stored.resolved_ms, Some(2_000));
            assert_eq!(
                store
                    .resolve_escalation("ap-nosuch", EscalationState::Denied, None, "U1", 3_000)
                    .await
                    .unwrap(),
                None
            );
        }
    }

    #[tokio::test]
    async fn a_reply_to_the_question_answers_it_even_among_others() {
        for db in testing::engines().await {
            let store = db.open().await;
            let first = ask(&store, EscalationKind::Question, None, 1_000).await;
            let second = ask(&store, EscalationKind::Question, None, 1_000).await;
            store.escalation_posted(&first.id, "p1").await.unwrap();
            store.escalation_posted(&second.id, "p2").await.unwrap();
            // A reply to something else is not an answer.
            assert_eq!(
                answered(&store, said("m0", None, Some("other"))).await,
                None
            );
            assert_eq!(
                answered(&store, said("m1", None, Some("p2"))).await,
                Some(second.id.clone())
            );
            let stored = store.escalation(&second.id).await.unwrap().unwrap();
            assert_eq!(stored.state, EscalationState::Answered);
            assert_eq!(
                (stored.answer.as_deref(), stored.answered_by.as_deref()),
                (Some("main"), Some("U1"))
            );
            assert_eq!(stored.answer_message_id.as_deref(), Some("m1"));
            // The same message through another account is a copy; the other question still waits.
            assert_eq!(
                answered(&store, said("m1", None, Some("p2"))).await,
                Some(format!("copy:{}", second.id))
            );
            assert_eq!(
                store.escalation(&first.id).await.unwrap().unwrap().state,
                EscalationState::Pending
            );
        }
    }

    #[tokio::test]
    async fn the_next_message_in_the_chat_answers_the_oldest_question() {
        for db in testing::engines().await {
            let store = db.open().await;
            let first = ask(&store, EscalationKind::Question, None, 1_000).await;
            let second = ask(&store, EscalationKind::Question, None, 1_500).await;
            let approval = ask(&store, EscalationKind::Approval, None, 500).await;
            // Said before the questions were asked: not an answer.
            let early = AnswerCandidate {
                sent_ms: 900,
                ..said("m0", None, None)
            };
            assert_eq!(answered(&store, early).await, None);
            // In another thread, or another chat: not an answer.
            assert_eq!(answered(&store, said("m1", Some("T9"), None)).await, None);
            let elsewhere = ChatKey::new(baton_contract::Platform::Slack, &"C2".into(), None);
            let elsewhere = AnswerCandidate {
                chat: elsewhere.clone(),
                chat_key: elsewhere,
                ..said("m2", None, None)
            };
            assert_eq!(answered(&store, elsewhere).await, None);
            assert_eq!(
                answered(&store, said("m3", None, None)).await,
                Some(first.id)
            );
            assert_eq!(
                answered(&store, said("m4", None, None)).await,
                Some(second.id)
            );
            // Approvals are not answered by chat messages.
            assert_eq!(answered(&store, said("m5", None, None)).await, None);
            assert_eq!(
                store.escalation(&approval.id).await.unwrap().unwrap().state,
                EscalationState::Pending
            );
        }
    }

    #[tokio::test]
    async fn a_message_in_the_questions_thread_answers_it() {
        for db in testing::engines().await {
            let store = db.open().await;
            let in_thread = ask(&store, EscalationKind::Question, Some("T1"), 1_000).await;
            let top = ask(&store, EscalationKind::Question, None, 1_000).await;
            store.escalation_posted(&top.id, "p-top").await.unwrap();
            // In the origin thread, even replying to another message there.
            assert_eq!(
                answered(&store, said("m1", Some("T1"), Some("T1"))).await,
                Some(in_thread.id)
            );
            // In a thread opened under the top-level question.
            assert_eq!(
                answered(&store, said("m2", Some("p-top"), None)).await,
                Some(top.id)
            );
        }
    }

    #[tokio::test]
    async fn a_failed_or_answered_question_takes_no_more_answers() {
        for db in testing::engines().await {
            let store = db.open().await;
            let q = ask(&store, EscalationKind::Question, None, 1_000).await;
            let failed = store
                .resolve_escalation(&q.id, EscalationState::Failed, Some("429"), "baton", 1_100)
                .await
                .unwrap();
            assert_eq!(failed.map(|e| e.state), Some(EscalationState::Failed));
            assert_eq!(answered(&store, said("m1", None, None)).await, None);
        }
    }
}
