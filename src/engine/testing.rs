//! What the engine's unit tests stand on, built over [`crate::gateway::testing::parts`]: a bot
//! whose backend a test scripts ([`Scripted`]), its account on a [`StubAdapter`] that records
//! what it was asked to do, a turn to take, what the session's transcript holds, and a wait on
//! a condition with a deadline.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{Adapter, StubAdapter};
use serde_json::json;

use super::{Attached, Caller, Engine, Heard, History, Recall, TurnPlan};
use crate::backend::{Backend, BackendError, BackendReply, TextSink, ToolExecutor, TurnRequest};
use crate::post::Target;
use crate::roster::{Account, Backends, Bot};
use crate::session::SessionKey;
use crate::store::{Entry, EntryKind, Origin, TranscriptQuery};

/// How a [`Scripted`] turn ends, once its pieces are written.
pub(crate) enum End {
    /// It answers this text.
    Says(&'static str),
    /// It fails in a way asking again may mend (the backend was unreachable).
    Fails,
    /// It fails in a way only the config can mend (the backend refused the model).
    Refused,
    /// It never answers.
    Hangs,
}

/// A backend that writes `pieces` one `gap` apart (to a turn that streams), then ends as `end`
/// says.
pub(crate) struct Scripted {
    /// What it writes while it works.
    pub pieces: Vec<&'static str>,
    /// The time before each piece.
    pub gap: Duration,
    /// How it ends.
    pub end: End,
}

impl Scripted {
    /// A backend that writes nothing first and ends as `end` says.
    pub(crate) fn ends(end: End) -> Scripted {
        Scripted {
            pieces: Vec::new(),
            gap: Duration::ZERO,
            end,
        }
    }

    async fn ended(&self) -> Result<BackendReply, BackendError> {
        match self.end {
            End::Says(text) => Ok(BackendReply {
                text: Some(text.to_owned()),
                model: "scripted".to_owned(),
                usage: None,
                attachments: Vec::new(),
            }),
            End::Fails => Err(BackendError::Unreachable("connection refused".into())),
            End::Refused => Err(BackendError::Refused {
                model: "scripted".into(),
                status: 404,
                message: "no such model".into(),
                fix: "name a model the server has",
            }),
            End::Hangs => std::future::pending().await,
        }
    }
}

#[async_trait]
impl Backend for Scripted {
    async fn run(
        &self,
        _request: &TurnRequest,
        _tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError> {
        self.ended().await
    }

    async fn run_streaming(
        &self,
        _request: &TurnRequest,
        _tools: &dyn ToolExecutor,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        for piece in &self.pieces {
            tokio::time::sleep(self.gap).await;
            sink.text(piece);
        }
        self.ended().await
    }
}

/// Bot `id` of the engine's config, with `backend` instead of its own.
pub(crate) fn bot_on(engine: &Engine, id: &str, backend: impl Backend + 'static) -> Arc<Bot> {
    let bot = engine
        .roster()
        .bot(&id.parse().expect("a bot id"))
        .expect("a bot of the config");
    Arc::new(Bot {
        id: bot.id.clone(),
        config: bot.config.clone(),
        system_prompt: bot.system_prompt.clone(),
        backends: Backends::new(bot.backends.own(), Arc::new(backend)),
        tools: bot.tools.clone(),
    })
}

/// The bot of config `id`, as the engine built it (an `echo` bot says back what it hears).
pub(crate) fn bot(engine: &Engine, id: &str) -> Arc<Bot> {
    Arc::clone(
        engine
            .roster()
            .bot(&id.parse().expect("a bot id"))
            .expect("a bot of the config"),
    )
}

/// `bot`'s account on `stub`.
pub(crate) fn account_on(bot: &Arc<Bot>, stub: &Arc<StubAdapter>) -> Account {
    Account {
        platform: stub.platform(),
        id: stub.account().clone(),
        bot: Arc::clone(bot),
        adapter: Arc::clone(stub) as Arc<dyn Adapter>,
    }
}

/// A turn of `bot` in `session`, woken by a person saying `text` there.
pub(crate) fn plan<'a>(bot: &'a Arc<Bot>, session: &SessionKey, text: &'a str) -> TurnPlan<'a> {
    TurnPlan {
        bot,
        caller: Caller::from_chat(session),
        history: History::NONE,
        heard: Heard {
            speaker: "U1",
            name: "Ann",
            origin: Origin::Human,
            text,
            message_id: None,
            meta: json!({}),
            attached: Attached::NONE,
        },
        deadline: None,
        recall: Recall::SessionTail,
        delivery: None,
    }
}

/// Everything `session`'s transcript holds, once what was written before is committed.
pub(crate) async fn transcript(engine: &Engine, session: &SessionKey) -> Vec<Entry> {
    let store = engine.store();
    store.write(|_| Ok(())).await.expect("the writer runs");
    store
        .transcript(TranscriptQuery::session(session.clone()))
        .await
        .expect("the transcript")
}

/// The kinds of `entries`, in order.
pub(crate) fn kinds(entries: &[Entry]) -> Vec<EntryKind> {
    entries.iter().map(|e| e.kind).collect()
}

/// Wait until `holds` (checked every few milliseconds), failing the test saying `what` after
/// 10 s of real time (a paused clock does not shorten it).
pub(crate) async fn until(what: &str, holds: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !holds() {
        assert!(
            std::time::Instant::now() < deadline,
            "not within 10 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Where a reply to chat `chat` goes: the chat itself, no thread.
pub(crate) fn target(chat: &str) -> Target {
    Target {
        chat: chat.into(),
        thread: None,
        reply_to: None,
        ephemeral: None,
    }
}
