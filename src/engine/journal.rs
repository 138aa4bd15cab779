//! Pipeline step 13: mirror everything to the session transcript, in the order it happened.
//!
//! A [`Journal`] is one turn's record: the inbound message, every tool call and result, the
//! outcome (`Silent` included) and each delivered chunk with its platform message id all go
//! into it, attributed to their speaker. It writes through the run's [`Pen`]
//! (`src/pen.rs`), which posting records its chunks with too. A failed transcript write is
//! logged, not raised. A store that cannot write still answers nothing: the event is refused
//! at intake (`src/dispatcher/inbox.rs`) and a post whose start cannot be recorded is not made
//! (`src/post/send.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::Engine;
use crate::backend::{ToolCall, ToolExecutor};
use crate::budget::{Budgets, Charge};
use crate::config::BackendKind;
use crate::events::{Event, Events};
use crate::pen::{Arrival, Pen};
use crate::roster::ToolName;
use crate::session::SessionKey;
use crate::store::{
    Answered, Artifact, DeliveryChange, EntryKind, HistoryTake, NewEntry, Notify, Origin,
    QueuedEarly, Store, StoreError, TurnStart, TurnStarted,
};
use crate::timing::now_ms;
use crate::trace::{Span, SpanKind, attr, in_span};

/// A line someone else said to a bot, as its transcript records it.
pub struct Said<'a> {
    /// A human id, or `bot:<id>`.
    pub speaker: &'a str,
    /// Human, bot or gateway.
    pub origin: Origin,
    /// The words.
    pub text: &'a str,
    /// The platform message id, for messages from a chat.
    pub message_id: Option<&'a str>,
    /// Kept with the entry.
    pub meta: Value,
}

/// Records one turn in one session: what it heard, the tools it called, what it answered.
#[derive(Clone)]
pub struct Journal {
    /// Writes the run's entries; posting writes the reply's chunks with it.
    pen: Pen,
    /// Tool calls recorded, shared by the journal's clones: a run's report counts them without
    /// reading its entries back.
    tool_calls: Arc<AtomicUsize>,
    /// The run's agent may call tools this journal does not count ([`Journal::lends_tools`]).
    lent_tools: Arc<AtomicBool>,
}

impl Journal {
    /// A journal for `run_id` in `session` (its bot's), announcing what it writes on `events`.
    pub fn new(store: Store, events: Events, session: SessionKey, run_id: String) -> Self {
        Self {
            pen: Pen::new(store, events, session, run_id),
            tool_calls: Arc::default(),
            lent_tools: Arc::default(),
        }
    }

    /// The journal for run `run_id` in `session`, on `engine`'s store and event stream.
    pub(crate) fn of(engine: &Engine, session: &SessionKey, run_id: String) -> Journal {
        let (store, events) = (engine.store().clone(), engine.events().clone());
        Journal::new(store, events, session.clone(), run_id)
    }

    /// The same journal for the run of a platform event, which came as `arrival` says: what a
    /// replayed run's first attempt already wrote of the inbound message is not written again.
    pub fn replaying(mut self, arrival: Arrival) -> Self {
        self.pen = self.pen.replaying(arrival);
        self
    }

    /// The run's pen, for posting its reply.
    pub fn pen(&self) -> &Pen {
        &self.pen
    }

    /// The session.
    pub fn session(&self) -> &SessionKey {
        self.pen.session()
    }

    /// The run id every entry of this turn carries.
    pub fn run_id(&self) -> &str {
        self.pen.run_id()
    }

    /// The store behind it.
    pub fn store(&self) -> &Store {
        self.pen.store()
    }

    /// The run owes `charge` (its turn's last model call, billed by `budgets`): the next write
    /// of the run that can carry it records it ([`Pen::owe`]).
    pub fn owe(&self, budgets: &Budgets, charge: Charge) {
        self.pen.owe(budgets, charge);
    }

    /// The run's turn runs on `backend`: its posts are recorded with it.
    pub fn using_backend(&self, backend: BackendKind) {
        self.pen.using_backend(backend);
    }

    /// The run's turn uses (or used) `model`: its posts are recorded with it.
    pub fn using_model(&self, model: &str) {
        self.pen.using_model(model);
    }

    /// The run is attaching files to its reply.
    pub fn attaches_files(&self) {
        self.pen.attaches_files();
    }

    /// The files attached to this run's reply ([`Pen::reply_files`]).
    pub async fn reply_files(&self) -> Result<Vec<Artifact>, StoreError> {
        self.pen.reply_files().await
    }

    /// Record a line someone else said to the bot (once per message and run, also when the
    /// run is replayed), with its session touched in the same store job.
    pub async fn heard(
        &self,
        speaker: &str,
        origin: Origin,
        text: &str,
        message_id: Option<&str>,
        meta: Value,
    ) {
        let line = Said {
            speaker,
            origin,
            text,
            message_id,
            meta,
        };
        self.turn_started(line, None, None, None).await;
    }

    /// [`Journal::heard`] for the line that starts a turn, taking the chat's `history` for the
    /// bot and reading the newest `tail` entries of the session in the same store job
    /// ([`Store::turn_start`]: one commit and no read on a mention's way to its reply, where
    /// there were three commits and a read), and marking the `delivery` the turn runs for
    /// running. Returns what was taken and read: for a platform event's run as soon as the
    /// job has run ([`Store::turn_start_early`]), for any other once it is committed. A store
    /// that cannot write is logged and the turn goes on without either.
    pub async fn turn_started(
        &self,
        line: Said<'_>,
        history: Option<HistoryTake<'_>>,
        tail: Option<usize>,
        delivery: Option<&str>,
    ) -> TurnStarted {
        let pen = &self.pen;
        let arrival = pen.arrival();
        let replayed =
            arrival == Some(Arrival::Replayed) && self.heard_before(line.message_id).await;
        let heard = (!replayed).then(|| {
            pen.entry(
                EntryKind::Inbound,
                line.speaker,
                line.origin,
                line.text,
                line.message_id,
                None,
                line.meta,
            )
        });
        let start = TurnStart {
            session: pen.session(),
            now_ms: now_ms(),
            history,
            heard,
            tail,
            delivery,
        };
        // A platform event's run is run again from the inbox after any stop, however far it
        // got: its model need not wait for its start's commit, and its posts wait for later
        // ones. Any other run's start (a delivery marked running) is on record first.
        let store = pen.store();
        let started = match arrival {
            Some(_) => store
                .turn_start_early(start)
                .await
                .map(|(s, c)| (s, Some(c))),
            None => store.turn_start(start).await.map(|s| (s, None)),
        };
        match started {
            Ok((started, committed)) => {
                if let Some(entry) = started.entry {
                    match committed {
                        Some(committed) => {
                            let pen = pen.clone();
                            let speaker = line.speaker.to_owned();
                            tokio::spawn(async move {
                                let written = committed.answer().await.map(|()| entry);
                                pen.written(written, EntryKind::Inbound, &speaker);
                            });
                        }
                        None => pen.announce(entry, EntryKind::Inbound, line.speaker),
                    }
                }
                started
            }
            Err(err) => {
                tracing::error!(session = %pen.session(), %err, "could not record the turn's start");
                TurnStarted::default()
            }
        }
    }

    /// Whether this run already recorded the inbound `message_id` (only asked on a replay: a
    /// fresh run cannot have).
    async fn heard_before(&self, message_id: Option<&str>) -> bool {
        let pen = &self.pen;
        match pen.store().run_entries(pen.session(), pen.run_id()).await {
            Ok(entries) => entries.iter().any(|e| {
                e.kind == EntryKind::Inbound && e.platform_message_id.as_deref() == message_id
            }),
            Err(err) => {
                tracing::error!(session = %pen.session(), %err, "could not read the run's entries; the inbound line may show twice");
                false
            }
        }
    }

    /// Record what the bot itself did (`Silent`, `Failure`, `Notice`, `Admin`).
    pub async fn bot_did(&self, kind: EntryKind, text: &str, meta: Value) {
        self.pen.write(self.own(kind, text, meta)).await;
    }

    /// Record the bot's answer to a delivery and settle the delivery (`change`) with it, in one
    /// store job ([`Store::delivery_answered`]). Returns once the job is queued, with what is
    /// left to wait for ([`AnswerQueued`]). Errors are the store's, for the caller to log with
    /// what they mean for the delivery.
    pub async fn answered(
        &self,
        text: &str,
        meta: Value,
        change: DeliveryChange,
    ) -> Result<AnswerQueued, StoreError> {
        let entry = self.own(EntryKind::Answer, text, meta);
        let queued = self.pen.store().delivery_answered(change, entry).await?;
        let pen = self.pen.clone();
        Ok(AnswerQueued { pen, queued })
    }

    /// How many tools this run called.
    pub fn tool_calls(&self) -> usize {
        self.tool_calls.load(Ordering::Relaxed)
    }

    /// The run's agent was given a token for `/mcp` (SPEC 6.1): it may call tools in this run
    /// that this journal does not count (each MCP call is recorded by a journal of its own),
    /// so the run is not known to have made nothing, nor to have attached no file to its reply
    /// (`reply_attach` over MCP attaches to this run).
    pub fn lends_tools(&self) {
        self.lent_tools.store(true, Ordering::Relaxed);
        self.pen.attaches_files();
    }

    /// Whether this run, in this process, made nothing but text: it called no tool (the only
    /// way a model makes artifacts or progress lines, or asks a question) and attached no
    /// file. Such a run needs nothing read back to report on.
    pub fn made_nothing(&self) -> bool {
        self.tool_calls() == 0 && !self.pen.attaching() && !self.lent_tools.load(Ordering::Relaxed)
    }

    /// A line of the bot's own.
    fn own(&self, kind: EntryKind, text: &str, meta: Value) -> NewEntry {
        let bot = self.pen.session().bot.as_str();
        self.pen
            .entry(kind, bot, Origin::Bot, text, None, None, meta)
    }

    /// Queue a line of the bot's own without waiting for its commit, so whatever the run
    /// writes next is written after it. Returns what is left: the entry announced once
    /// committed, or its failure logged. A tool's call and result waited for two commits on
    /// the way to every reply that used a tool (BENCHMARKS.md, issue 23).
    async fn write_behind(
        &self,
        kind: EntryKind,
        text: &str,
        meta: Value,
    ) -> impl Future<Output = ()> + use<> {
        self.pen.queue(self.own(kind, text, meta)).await
    }
}

/// The journal for run `run_id` in `session`, with the session recorded first (created, or its
/// last activity moved). For records made outside a turn (a skipped schedule, an answer to an
/// escalation) as much as for turns.
pub(crate) async fn journal(engine: &Engine, session: &SessionKey, run_id: String) -> Journal {
    if let Err(err) = engine.store().touch_session(session, now_ms()).await {
        tracing::error!(%err, "could not record the session");
    }
    Journal::of(engine, session, run_id)
}

/// A delivery's answer in the writer's queue ([`Journal::answered`]).
pub struct AnswerQueued {
    pen: Pen,
    queued: QueuedEarly<Answered>,
}

impl AnswerQueued {
    /// Once its job has run: the delivery's notify state as [`Store::delivery_settle`] returns
    /// it, and what is left, its commit (the entry announced then).
    pub async fn ran(
        self,
    ) -> Result<(Option<Notify>, impl Future<Output = Result<(), StoreError>>), StoreError> {
        let (answered, committed) = self.queued.ran().await?;
        let pen = self.pen;
        let committed = async move {
            committed.answer().await?;
            let speaker = pen.session().bot.as_str();
            pen.announce(answered.entry, EntryKind::Answer, speaker);
            Ok(())
        };
        Ok((answered.notify, committed))
    }
}

/// Wraps a turn's tool executor so every call and result lands in the transcript.
pub struct RecordingTools<'a> {
    inner: &'a dyn ToolExecutor,
    journal: &'a Journal,
}

impl<'a> RecordingTools<'a> {
    /// Record the calls made through `inner` in `journal`.
    pub fn new(inner: &'a dyn ToolExecutor, journal: &'a Journal) -> Self {
        Self { inner, journal }
    }
}

#[async_trait]
impl ToolExecutor for RecordingTools<'_> {
    async fn call(&self, call: &ToolCall) -> Value {
        let journal = self.journal;
        let pen = &journal.pen;
        let args = json!({"tool": call.name, "call_id": call.id, "arguments": call.arguments});
        let text = format!("{} {}", call.name, call.arguments);
        // Queued, not waited for: what the tool writes is written after it.
        let called = journal.write_behind(EntryKind::ToolCall, &text, args).await;
        journal.tool_calls.fetch_add(1, Ordering::Relaxed);
        if ToolName::parse(&call.name) == Some(ToolName::ReplyAttach) {
            journal.attaches_files();
        }
        pen.events().emit(Event::ToolCall {
            bot: pen.session().bot.clone(),
            session: pen.session().render(),
            run_id: pen.run_id().to_owned(),
            tool: call.name.clone(),
            call_id: call.id.clone(),
        });
        let span = Span::start(
            || format!("execute_tool {}", call.name),
            SpanKind::Internal,
            || {
                vec![
                    attr("gen_ai.operation.name", "execute_tool"),
                    attr("gen_ai.tool.name", call.name.clone()),
                    attr("gen_ai.tool.call.id", call.id.clone()),
                ]
            },
        );
        let result = in_span!(span, self.inner.call(call));
        if let Some(status) = result["status"].as_str() {
            span.set(|| vec![attr("baton.tool.status", status.to_owned())]);
        }
        drop(span);
        called.await;
        pen.events().emit(Event::ToolResult {
            bot: pen.session().bot.clone(),
            session: pen.session().render(),
            run_id: pen.run_id().to_owned(),
            tool: call.name.clone(),
            call_id: call.id.clone(),
            status: result["status"].as_str().map(str::to_owned),
        });
        // Queued too: the turn goes on, and what it writes next is written after it.
        let meta = json!({"tool": call.name, "call_id": call.id});
        let recorded = journal
            .write_behind(EntryKind::ToolResult, &result.to_string(), meta)
            .await;
        tokio::spawn(recorded);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::NoTools;
    use crate::store::{NewArtifact, Put};

    /// A journal opened for a record (a turn's, or one outside any turn) records its session
    /// first, so the session is listed before anything is written in it.
    #[tokio::test]
    async fn a_journal_records_its_session_first() {
        let gw =
            crate::gateway::testing::parts(&crate::gateway::testing::echo_config(&["b"], "")).await;
        let session = crate::session::test_key("s");
        let store = gw.engine.store();
        assert!(store.session(&session).await.unwrap().is_none());
        let opened = journal(&gw.engine, &session, "r".into()).await;
        assert!(store.session(&session).await.unwrap().is_some());
        let written = opened.store().run_entries(&session, "r").await.unwrap();
        assert!(written.is_empty(), "nothing written in it yet");
    }

    /// Only the first run of a fresh event that attached nothing skips reading its reply files:
    /// files attached to its run id behind its back are not seen, while any other run (not an
    /// event's, a replay, one that called `reply_attach`, whose backend attached files, or
    /// whose agent may have attached them over MCP) reads them.
    #[tokio::test]
    async fn only_a_fresh_event_s_run_that_attached_nothing_skips_its_reply_files() {
        let store = Store::open(":memory:").await.unwrap();
        let new = NewArtifact {
            name: "notes.txt".into(),
            media_type: "text/plain".into(),
            content: b"notes".to_vec(),
            bot: "scout".parse().unwrap(),
            session: crate::session::test_key("s"),
            run_id: None,
            inputs: Vec::new(),
            created_ms: 1,
        };
        let Put::Stored(artifact) = store.artifact_put(new).await.unwrap() else {
            panic!("no inputs to be unknown");
        };
        store.reply_attach("r", vec![artifact.id], 2).await.unwrap();
        let pen = || {
            let (events, session) = (Events::default(), crate::session::test_key("s"));
            Journal::new(store.clone(), events, session, "r".into())
        };
        let files = |journal: Journal| async move { journal.reply_files().await.unwrap().len() };

        assert_eq!(files(pen().replaying(Arrival::Fresh)).await, 0);
        assert_eq!(files(pen()).await, 1, "not an event's run");
        assert_eq!(files(pen().replaying(Arrival::Replayed)).await, 1);
        let attaching = pen().replaying(Arrival::Fresh);
        attaching.attaches_files();
        assert_eq!(files(attaching).await, 1, "its backend attached files");
        let call = |name: &str| ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let sending = pen().replaying(Arrival::Fresh);
        RecordingTools::new(&NoTools, &sending)
            .call(&call("sessions_send"))
            .await;
        assert!(!sending.made_nothing());
        assert_eq!(files(sending).await, 0, "no tool but reply_attach attaches");
        let quiet = pen();
        assert!(quiet.made_nothing());
        quiet.lends_tools();
        assert!(!quiet.made_nothing(), "its agent may call tools over MCP");
        let lending = pen().replaying(Arrival::Fresh);
        lending.lends_tools();
        assert_eq!(
            files(lending).await,
            1,
            "its agent may attach files over MCP"
        );
        let calling = pen().replaying(Arrival::Fresh);
        RecordingTools::new(&NoTools, &calling)
            .call(&call("reply_attach"))
            .await;
        assert_eq!(files(calling).await, 1, "it called reply_attach");
    }

    /// A platform event's turn is given its start (the tail read, the history taken) once the
    /// writer has run the job, before its batch commits; any other run's turn (a delivery's,
    /// a schedule's) only once it is committed. The next batch is held open on the writer so
    /// the commit cannot come between.
    #[tokio::test]
    async fn only_a_platform_event_s_turn_starts_before_its_start_is_committed() {
        let db = crate::store::testing::TestDb::sqlite();
        let store = db.open().await;
        let session = crate::session::test_key("s");
        for (arrival, early) in [(Some(Arrival::Fresh), true), (None, false)] {
            let mut journal = Journal::new(
                store.clone(),
                Events::default(),
                session.clone(),
                format!("{arrival:?}"),
            );
            if let Some(arrival) = arrival {
                journal = journal.replaying(arrival);
            }
            let line = Said {
                speaker: "U1",
                origin: Origin::Human,
                text: "hello",
                message_id: None,
                meta: Value::Null,
            };
            let first = crate::store::testing::hold(&store).await.running().await;
            let started = journal.turn_started(line, None, Some(40), None);
            let mut started = std::pin::pin!(started);
            // Queued behind the held job, then held itself in the batch after it.
            assert!(futures::poll!(&mut started).is_pending());
            let after = crate::store::testing::hold(&store).await;
            first.let_go();
            let after = after.running().await;
            let given = futures::poll!(&mut started);
            assert_eq!(given.is_ready(), early, "{arrival:?}");
            let recorded = || async {
                let entries = store.run_entries(&session, journal.run_id()).await.unwrap();
                entries.len()
            };
            if early {
                assert_eq!(recorded().await, 0, "given before its batch committed");
            }
            after.let_go();
            if given.is_pending() {
                started.await;
            }
            first.committed().await;
            after.committed().await;
            assert_eq!(recorded().await, 1, "{arrival:?}");
        }
    }
}
