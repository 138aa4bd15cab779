//! One run's pen: writes the run's entries to its session's transcript, attributed to their
//! speaker, and announces each on the event stream once it is written.
//!
//! It sits below both of its writers. The engine's journal (`src/engine/journal.rs`) records a
//! turn through it (the inbound line, tool calls, the outcome); posting (`src/post/`) records
//! each delivered chunk and file through it, with the chunk's hand-over to the other bots, as
//! soon as the platform confirms the post. A failed write is logged, not raised: the post is
//! already in the chat.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::budget::{Budgets, Charge};
use crate::config::BackendKind;
use crate::events::{Event, Events};
use crate::session::SessionKey;
use crate::store::{
    Artifact, EntryKind, Filing, InboxId, NewEntry, Origin, SendStart, Store, StoreError,
};
use crate::timing::now_ms;

/// Whether a run is the first for its event, or a replay of one a stopped process left
/// unfinished (which may have written some of its entries already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The event's first run.
    Fresh,
    /// Run again after a stop.
    Replayed,
}

/// Writes one run's entries to one session, and announces each on the event stream.
#[derive(Clone)]
pub struct Pen {
    store: Store,
    events: Events,
    session: SessionKey,
    run_id: String,
    /// The event's arrival, for the run of a platform event; `None` for every other run, whose
    /// id may have been used by an earlier process (a schedule's occurrence, a chain's turn).
    arrival: Option<Arrival>,
    /// Whether the run attached files to its reply (a `reply_attach` call, or its backend).
    attaching: Arc<AtomicBool>,
    /// The backend the run's turn ran on and the model it asked (then the one that answered),
    /// written with each post of its reply: a chat may give a bot another backend or model
    /// than its own.
    ran_on: Arc<parking_lot::Mutex<RanOn>>,
    /// The run's model calls billed and not written yet ([`Pen::owe`]).
    owed: Arc<parking_lot::Mutex<Owed>>,
}

/// Usage rows a run owes the store: its next write that can carry them does (the start of its
/// post, or a line of its own), saving the turn a store job of their own (BENCHMARKS.md, issue
/// 49). Rows no write took are written alone once the run's pen is let go.
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

impl Pen {
    /// A pen for `run_id` in `session` (its bot's), announcing what it writes on `events`.
    pub fn new(store: Store, events: Events, session: SessionKey, run_id: String) -> Self {
        Self {
            store,
            events,
            session,
            run_id,
            arrival: None,
            attaching: Arc::default(),
            ran_on: Arc::default(),
            owed: Arc::default(),
        }
    }

    /// The run owes `charge` (its turn's last model call, billed by `budgets`): the pen's next
    /// write that can carry it records it.
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

    /// The same pen for the run of a platform event, which came as `arrival` says.
    pub fn replaying(mut self, arrival: Arrival) -> Self {
        self.arrival = Some(arrival);
        self
    }

    /// How the run's platform event came; `None` for a run of anything else.
    pub fn arrival(&self) -> Option<Arrival> {
        self.arrival
    }

    /// The session.
    pub fn session(&self) -> &SessionKey {
        &self.session
    }

    /// The run id every entry of this run carries.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The store behind it.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The event stream it announces on.
    pub fn events(&self) -> &Events {
        &self.events
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

    /// The run is attaching files to its reply.
    pub fn attaches_files(&self) {
        self.attaching.store(true, Ordering::Relaxed);
    }

    /// Whether the run attached files to its reply.
    pub fn attaching(&self) -> bool {
        self.attaching.load(Ordering::Relaxed)
    }

    /// The files attached to this run's reply. Not read for the first run of a fresh event that
    /// attached none: its run id is the event's, new, so no other run can have attached files
    /// to it (one read a reply, BENCHMARKS.md, issue 23).
    pub async fn reply_files(&self) -> Result<Vec<Artifact>, StoreError> {
        if self.arrival == Some(Arrival::Fresh) && !self.attaching() {
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
        let entry = self.entry(
            EntryKind::Reply,
            self.session.bot.as_str(),
            Origin::Bot,
            &text,
            Some(message_id),
            Some(idempotency_key),
            meta,
        );
        self.write(entry).await;
    }

    /// Write `entry`, with what the run owes, and wait for its commit; announce it, or log its
    /// failure.
    pub async fn write(&self, entry: NewEntry) {
        let (kind, speaker) = (entry.kind, entry.speaker.clone());
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
        self.written(written, kind, &speaker);
    }

    /// Queue `entry` (the bot's own), returning what is left: announcing it once committed, or
    /// logging its failure.
    pub async fn queue(&self, entry: NewEntry) -> impl Future<Output = ()> + use<> {
        let kind = entry.kind;
        let queued = self.store.append_queued(entry).await;
        let pen = self.clone();
        async move {
            let written = match queued {
                Ok(queued) => queued.answer().await,
                Err(err) => Err(err),
            };
            pen.written(written, kind, pen.session.bot.as_str());
        }
    }

    /// An entry `written` (its id), announced; or its failure, logged.
    pub fn written(&self, written: Result<i64, StoreError>, kind: EntryKind, speaker: &str) {
        match written {
            Ok(entry) => self.announce(entry, kind, speaker),
            Err(err) => {
                tracing::error!(session = %self.session, %err, "could not write the transcript");
            }
        }
    }

    /// Tell the event stream that entry `entry` of this run is written.
    pub fn announce(&self, entry: i64, kind: EntryKind, speaker: &str) {
        self.events.emit(Event::Entry {
            entry,
            session: self.session.render(),
            bot: self.session.bot.clone(),
            run_id: self.run_id.clone(),
            kind: kind.as_str().to_owned(),
            speaker: speaker.to_owned(),
        });
    }

    /// An entry of this run, said by `speaker` now.
    #[allow(clippy::too_many_arguments)]
    pub fn entry(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TranscriptQuery;

    /// A post of the reply is recorded with the model its turn used, once one is known; a
    /// backend without models names none. Every entry is announced on the event stream.
    #[tokio::test]
    async fn posts_are_recorded_with_the_model_their_turn_used() {
        let store = Store::open(":memory:").await.unwrap();
        let events = Events::default();
        let mut announced = events.subscribe(None).live;
        let session = crate::session::test_key("s");
        let pen = Pen::new(store.clone(), events, session.clone(), "r".into());
        pen.using_model("");
        pen.delivered("before", "m1", "r#0", Vec::new()).await;
        pen.using_model("small");
        pen.delivered("after", "m2", "r#1", Vec::new()).await;
        store.write(|_| Ok(())).await.unwrap();
        let entries = store
            .transcript(TranscriptQuery::session(session))
            .await
            .unwrap();
        let models: Vec<_> = entries.iter().map(|e| e.meta["model"].as_str()).collect();
        assert_eq!(models, [None, Some("small")]);
        for _ in 0..2 {
            let event = tokio::time::timeout(std::time::Duration::from_secs(10), announced.recv());
            let event = event.await.expect("announced").expect("open stream");
            assert!(matches!(event.event, Event::Entry { .. }));
        }
    }
}
