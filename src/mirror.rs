//! Pipeline step 13: mirror everything to the session transcript, in the order it happened.
//!
//! A [`Journal`] is one turn's pen: the inbound message, every tool call and result, the outcome
//! (`Silent` included) and each delivered chunk with its platform message id all go through it,
//! attributed to their speaker. A failed transcript write is logged, not raised. A store that
//! cannot write still answers nothing: the event is refused at intake (`src/dispatcher/inbox.rs`)
//! and a post whose start cannot be recorded is not made (`src/post/send.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::backend::{ToolCall, ToolExecutor};
use crate::budget::{Budgets, Charge};
use crate::config::BackendKind;
use crate::events::{Event, Events};
use crate::roster::ToolName;
use crate::session::SessionKey;
use crate::store::{
    Answered, Artifact, DeliveryChange, EntryKind, Filing, HistoryTake, InboxId, NewEntry, Notify,
    Origin, QueuedEarly, SendStart, Store, StoreError, TurnStart, TurnStarted,
};
use crate::timing::now_ms;
use crate::trace::{Span, SpanKind, attr, in_span};

/// Whether a run is the first for its event, or a replay of one a stopped process left
/// unfinished (which may have written some of its entries already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The event's first run.
    Fresh,
    /// Run again after a stop.
    Replayed,
}

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

/// Writes one turn's entries to one session, and announces each on the event stream.
#[derive(Clone)]
pub struct Journal {
    store: Store,
    events: Events,
    session: SessionKey,
    run_id: String,
    /// The event's arrival, for the run of a platform event; `None` for every other run, whose
    /// id may have been used by an earlier process (a schedule's occurrence, a chain's turn).
    arrival: Option<Arrival>,
    /// Tool calls recorded, shared by the journal's clones: a run's report counts them without
    /// reading its entries back.
    tool_calls: Arc<AtomicUsize>,
    /// Whether the run attached files to its reply (a `reply_attach` call, or its backend).
    attaching: Arc<AtomicBool>,
    /// The backend the run's turn ran on and the model it asked (then the one that answered),
    /// written with each post of its reply: a chat may give a bot another backend or model
    /// than its own.
    ran_on: Arc<parking_lot::Mutex<RanOn>>,
    /// The run's model calls billed and not written yet ([`Journal::owe`]).
    owed: Arc<parking_lot::Mutex<Owed>>,
}

/// Usage rows a run owes the store: its next write that can carry them does (the start of its
/// post, or a line of its own), saving the turn a store job of their own (BENCHMARKS.md, issue
/// 49). Rows no write took are written alone once the run's journal is let go.
#[derive(Default)]
struct Owed {
    budgets: Option<Budgets>,
    charges: Vec<Charge>,
}

impl Drop for Owed {
    fn drop(&mut self) {
        let (Some(budgets), charges) = (self.budgets.take(), std::mem::take(&mut self.charges))
        else {
            return;
        };
        if charges.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move { budgets.record(charges).await })),
            Err(_) => tracing::error!(
                calls = charges.len(),
                "a run's usage could not be recorded: no runtime left to write it"
            ),
        }
    }
}

/// What a run's turn ran on, as far as known.
#[derive(Debug, Default)]
struct RanOn {
    backend: Option<BackendKind>,
    model: Option<String>,
}

impl Journal {
    /// A journal for `run_id` in `session` (its bot's), announcing what it writes on `events`.
    pub fn new(store: Store, events: Events, session: SessionKey, run_id: String) -> Self {
        Self {
            store,
            events,
            session,
            run_id,
            arrival: None,
            tool_calls: Arc::default(),
            attaching: Arc::default(),
            ran_on: Arc::default(),
            owed: Arc::default(),
        }
    }

    /// The run owes `charge` (its turn's last model call, billed by `budgets`): the journal's
    /// next write that can carry it records it.
    pub fn owe(&self, budgets: &Budgets, charge: Charge) {
        let mut owed = self.owed.lock();
        owed.budgets.get_or_insert_with(|| budgets.clone());
        owed.charges.push(charge);
    }

    /// What the run owes, taken for the write about to carry it.
    fn owed(&self) -> Option<(Budgets, Vec<Charge>)> {
        let mut owed = self.owed.lock();
        let charges = std::mem::take(&mut owed.charges);
        if charges.is_empty() {
            return None;
        }
        owed.budgets.clone().map(|budgets| (budgets, charges))
    }

    /// Decide, and record, whether the chunk keyed `idempotency_key` may be posted now
    /// ([`Store::send_begin`]), recording what the run owes in the same job.
    pub async fn send_begin(
        &self,
        idempotency_key: &str,
        now_ms: i64,
    ) -> Result<SendStart, StoreError> {
        let Some((budgets, charges)) = self.owed() else {
            return self.store.send_begin(idempotency_key, now_ms).await;
        };
        let rows = charges.iter().map(|c| c.row.clone()).collect();
        let begun = self
            .store
            .send_begin_charging(idempotency_key, now_ms, rows)
            .await;
        match begun {
            Ok((start, ids)) => {
                budgets.recorded(charges, Ok(ids)).await;
                Ok(start)
            }
            Err(err) => {
                budgets.recorded(charges, Err(&err)).await;
                Err(err)
            }
        }
    }

    /// The run's turn runs on `backend`: its posts are recorded with it.
    pub fn using_backend(&self, backend: BackendKind) {
        self.ran_on.lock().backend = Some(backend);
    }

    /// The run's turn uses (or used) `model`: its posts are recorded with it. An empty name
    /// (a backend without models) is not recorded.
    pub fn using_model(&self, model: &str) {
        if !model.is_empty() {
            self.ran_on.lock().model = Some(model.to_owned());
        }
    }

    /// What a post of the reply is recorded with: the backend and the model, when known.
    fn reply_meta(&self) -> Value {
        let ran_on = self.ran_on.lock();
        let mut meta = serde_json::Map::new();
        if let Some(backend) = ran_on.backend {
            meta.insert("backend".into(), backend.as_str().into());
        }
        if let Some(model) = &ran_on.model {
            meta.insert("model".into(), model.as_str().into());
        }
        if meta.is_empty() {
            Value::Null
        } else {
            Value::Object(meta)
        }
    }

    /// The same journal for the run of a platform event, which came as `arrival` says: what a
    /// replayed run's first attempt already wrote of the inbound message is not written again.
    pub fn replaying(mut self, arrival: Arrival) -> Self {
        self.arrival = Some(arrival);
        self
    }

    /// The session.
    pub fn session(&self) -> &SessionKey {
        &self.session
    }

    /// The run id every entry of this turn carries.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The store behind it.
    pub fn store(&self) -> &Store {
        &self.store
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
        let replayed =
            self.arrival == Some(Arrival::Replayed) && self.heard_before(line.message_id).await;
        let heard = (!replayed).then(|| {
            self.entry(
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
            session: &self.session,
            now_ms: now_ms(),
            history,
            heard,
            tail,
            delivery,
        };
        // A platform event's run is run again from the inbox after any stop, however far it
        // got: its model need not wait for its start's commit, and its posts wait for later
        // ones. Any other run's start (a delivery marked running) is on record first.
        let started = match self.arrival {
            Some(_) => self
                .store
                .turn_start_early(start)
                .await
                .map(|(s, c)| (s, Some(c))),
            None => self.store.turn_start(start).await.map(|s| (s, None)),
        };
        match started {
            Ok((started, committed)) => {
                if let Some(entry) = started.entry {
                    match committed {
                        Some(committed) => {
                            let journal = self.clone();
                            let speaker = line.speaker.to_owned();
                            tokio::spawn(async move {
                                let written = committed.answer().await.map(|()| entry);
                                journal.written(written, EntryKind::Inbound, &speaker);
                            });
                        }
                        None => self.announce(entry, EntryKind::Inbound, line.speaker),
                    }
                }
                started
            }
            Err(err) => {
                tracing::error!(session = %self.session, %err, "could not record the turn's start");
                TurnStarted::default()
            }
        }
    }

    /// Whether this run already recorded the inbound `message_id` (only asked on a replay: a
    /// fresh run cannot have).
    async fn heard_before(&self, message_id: Option<&str>) -> bool {
        match self.store.run_entries(&self.session, &self.run_id).await {
            Ok(entries) => entries.iter().any(|e| {
                e.kind == EntryKind::Inbound && e.platform_message_id.as_deref() == message_id
            }),
            Err(err) => {
                tracing::error!(session = %self.session, %err, "could not read the run's entries; the inbound line may show twice");
                false
            }
        }
    }

    /// Record what the bot itself did (`Silent`, `Failure`, `Notice`, `Admin`).
    pub async fn bot_did(&self, kind: EntryKind, text: &str, meta: Value) {
        self.write(
            kind,
            self.session.bot.as_str(),
            Origin::Bot,
            text,
            None,
            None,
            meta,
        )
        .await;
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
        let speaker = self.session.bot.as_str();
        let entry = self.entry(
            EntryKind::Answer,
            speaker,
            Origin::Bot,
            text,
            None,
            None,
            meta,
        );
        let queued = self.store.delivery_answered(change, entry).await?;
        let journal = self.clone();
        Ok(AnswerQueued { journal, queued })
    }

    /// How many tools this run called.
    pub fn tool_calls(&self) -> usize {
        self.tool_calls.load(Ordering::Relaxed)
    }

    /// The run is attaching files to its reply.
    pub fn attaches_files(&self) {
        self.attaching.store(true, Ordering::Relaxed);
    }

    /// Whether this run, in this process, made nothing but text: it called no tool (the only
    /// way a model makes artifacts or progress lines) and attached no file. Such a run needs
    /// nothing read back to report on.
    pub fn made_nothing(&self) -> bool {
        self.tool_calls() == 0 && !self.attaching.load(Ordering::Relaxed)
    }

    /// The files attached to this run's reply. Not read for the first run of a fresh event that
    /// attached none: its run id is the event's, new, so no other run can have attached files
    /// to it (one read a reply, BENCHMARKS.md, issue 23).
    pub async fn reply_files(&self) -> Result<Vec<Artifact>, StoreError> {
        if self.arrival == Some(Arrival::Fresh) && !self.attaching.load(Ordering::Relaxed) {
            return Ok(Vec::new());
        }
        self.store.reply_files(&self.run_id).await
    }

    /// Record one delivered chunk, and file its `handovers` (the chunk as other bots' accounts
    /// receive it) in the same store job. Returns each hand-over's inbox row (`None`: a
    /// duplicate, or nothing recorded, which is logged). A chunk no other bot is handed is only
    /// queued: whatever the run writes next (its next chunk's send, the event's end, the
    /// session's next turn) is written after it, and a crash loses no more than it would after
    /// the post and before a waited commit. The lane is let go one commit sooner (BENCHMARKS.md,
    /// issue 23).
    pub async fn delivered(
        &self,
        text: &str,
        message_id: &str,
        idempotency_key: &str,
        handovers: Vec<Filing>,
    ) -> Vec<Option<InboxId>> {
        let entry = self.entry(
            EntryKind::Reply,
            self.session.bot.as_str(),
            Origin::Bot,
            text,
            Some(message_id),
            Some(idempotency_key),
            self.reply_meta(),
        );
        if handovers.is_empty() {
            tokio::spawn(self.queue(entry).await);
            return Vec::new();
        }
        let bots = handovers.len();
        match self
            .store
            .append_handing_over(entry, handovers, now_ms())
            .await
        {
            Ok((entry, filed)) => {
                self.announce(entry, EntryKind::Reply, self.session.bot.as_str());
                filed
            }
            Err(err) => {
                tracing::error!(
                    session = %self.session, %err, handovers = bots,
                    "could not write the transcript; the post is not recorded, and the other \
                     bots in the chat are not handed it"
                );
                Vec::new()
            }
        }
    }

    /// Record one delivered file: a reply entry naming the attached artifact, under the
    /// upload's idempotency key (so a replay finds it and does not post it again). Files are
    /// not handed to other bots: they see the reply's text.
    pub async fn delivered_file(&self, file: &Artifact, message_id: &str, idempotency_key: &str) {
        let text = format!("[attached {} ({})]", file.name, file.id);
        let meta = json!({"artifact": {
            "id": file.id, "name": file.name, "media_type": file.media_type, "bytes": file.bytes,
        }});
        self.write(
            EntryKind::Reply,
            self.session.bot.as_str(),
            Origin::Bot,
            &text,
            Some(message_id),
            Some(idempotency_key),
            meta,
        )
        .await;
    }

    #[allow(clippy::too_many_arguments)]
    async fn write(
        &self,
        kind: EntryKind,
        speaker: &str,
        origin: Origin,
        text: &str,
        message_id: Option<&str>,
        idempotency_key: Option<&str>,
        meta: Value,
    ) {
        let entry = self.entry(
            kind,
            speaker,
            origin,
            text,
            message_id,
            idempotency_key,
            meta,
        );
        let written = match self.owed() {
            None => self.store.append(entry).await,
            Some((budgets, charges)) => {
                let rows = charges.iter().map(|c| c.row.clone()).collect();
                match self.store.append_charging(entry, rows).await {
                    Ok((entry, ids)) => {
                        budgets.recorded(charges, Ok(ids)).await;
                        Ok(entry)
                    }
                    Err(err) => {
                        budgets.recorded(charges, Err(&err)).await;
                        Err(err)
                    }
                }
            }
        };
        self.written(written, kind, speaker);
    }

    /// [`Journal::write`] for a line of the bot's own, without waiting for its commit: it is
    /// queued, so whatever the run writes next is written after it. Returns what is left: the
    /// entry announced once committed, or its failure logged. A tool's call and result waited
    /// for two commits on the way to every reply that used a tool (BENCHMARKS.md, issue 23).
    async fn write_behind(
        &self,
        kind: EntryKind,
        text: &str,
        meta: Value,
    ) -> impl Future<Output = ()> + use<> {
        let speaker = self.session.bot.as_str();
        let entry = self.entry(kind, speaker, Origin::Bot, text, None, None, meta);
        self.queue(entry).await
    }

    /// Queue `entry` (the bot's own), returning what is left: announcing it once committed, or
    /// logging its failure.
    async fn queue(&self, entry: NewEntry) -> impl Future<Output = ()> + use<> {
        let kind = entry.kind;
        let queued = self.store.append_queued(entry).await;
        let journal = self.clone();
        async move {
            let written = match queued {
                Ok(queued) => queued.answer().await,
                Err(err) => Err(err),
            };
            journal.written(written, kind, journal.session.bot.as_str());
        }
    }

    /// An entry `written` (its id), announced; or its failure, logged.
    fn written(&self, written: Result<i64, StoreError>, kind: EntryKind, speaker: &str) {
        match written {
            Ok(entry) => self.announce(entry, kind, speaker),
            Err(err) => {
                tracing::error!(session = %self.session, %err, "could not write the transcript");
            }
        }
    }

    /// Tell the event stream that entry `entry` of this run is written.
    fn announce(&self, entry: i64, kind: EntryKind, speaker: &str) {
        self.events.emit(Event::Entry {
            entry,
            session: self.session.render(),
            bot: self.session.bot.clone(),
            run_id: self.run_id.clone(),
            kind: kind.as_str().to_owned(),
            speaker: speaker.to_owned(),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &self,
        kind: EntryKind,
        speaker: &str,
        origin: Origin,
        text: &str,
        message_id: Option<&str>,
        idempotency_key: Option<&str>,
        meta: Value,
    ) -> NewEntry {
        NewEntry {
            session: self.session.clone(),
            ts_ms: now_ms(),
            kind,
            speaker: speaker.to_owned(),
            origin,
            text: text.to_owned(),
            platform_message_id: message_id.map(str::to_owned),
            run_id: Some(self.run_id.clone()),
            idempotency_key: idempotency_key.map(str::to_owned),
            meta,
        }
    }
}

/// A delivery's answer in the writer's queue ([`Journal::answered`]).
pub struct AnswerQueued {
    journal: Journal,
    queued: QueuedEarly<Answered>,
}

impl AnswerQueued {
    /// Once its job has run: the delivery's notify state as [`Store::delivery_settle`] returns
    /// it, and what is left, its commit (the entry announced then).
    pub async fn ran(
        self,
    ) -> Result<(Option<Notify>, impl Future<Output = Result<(), StoreError>>), StoreError> {
        let (answered, committed) = self.queued.ran().await?;
        let journal = self.journal;
        let committed = async move {
            committed.answer().await?;
            let speaker = journal.session.bot.as_str();
            journal.announce(answered.entry, EntryKind::Answer, speaker);
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
        let args = json!({"tool": call.name, "call_id": call.id, "arguments": call.arguments});
        let text = format!("{} {}", call.name, call.arguments);
        // Queued, not waited for: what the tool writes is written after it.
        let called = journal.write_behind(EntryKind::ToolCall, &text, args).await;
        journal.tool_calls.fetch_add(1, Ordering::Relaxed);
        if ToolName::parse(&call.name) == Some(ToolName::ReplyAttach) {
            journal.attaches_files();
        }
        journal.events.emit(Event::ToolCall {
            bot: journal.session.bot.clone(),
            session: journal.session.render(),
            run_id: journal.run_id.clone(),
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
        journal.events.emit(Event::ToolResult {
            bot: journal.session.bot.clone(),
            session: journal.session.render(),
            run_id: journal.run_id.clone(),
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

    /// Only the first run of a fresh event that attached nothing skips reading its reply files:
    /// files attached to its run id behind its back are not seen, while any other run (not an
    /// event's, a replay, one that called `reply_attach` or whose backend attached files) reads
    /// them.
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
