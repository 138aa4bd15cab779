//! [`StubAdapter`]: an account on no platform, for the tests of what the gateway does with an
//! adapter (delivery, streaming, typing indicators, file intake, the lease fence). It keeps every call it gets in
//! order, answers posts from a script, and its `run` holds a connection open until shutdown.
//! The platform adapters' own tests talk to fake platforms instead.
//!
//! Not behind a feature: a feature only the tests turn on would give this crate other features
//! under `cargo test` than under `cargo build`, and every crate above it would be compiled
//! twice. Nothing in the gateway names it, so it is not linked into the binary.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::adapter::{Adapter, AdapterError, Capabilities, EventSink, NotTaken};
use crate::connection::{ConnectionCell, ConnectionState};
use crate::feedback::{DeleteMessage, EditMessage, Typing, TypingTarget};
use crate::files::{DownloadError, Downloaded, FileRef};
use crate::ids::{AccountId, MessageId, Platform, UserId};
use crate::inbound::InboundEvent;
use crate::outbound::{OutboundMessage, SendError, SentMessage};

/// One call the gateway made, as the stub got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// [`Adapter::send`].
    Send(OutboundMessage),
    /// [`Adapter::edit`].
    Edit(EditMessage),
    /// [`Adapter::download`].
    Download(FileRef),
    /// [`Adapter::delete`].
    Delete(DeleteMessage),
    /// [`Adapter::typing_start`] (a renewal too).
    TypingStart(TypingTarget),
    /// [`Adapter::typing_says`], with its line.
    TypingSays(String),
    /// [`Adapter::typing_stop`].
    TypingStop(TypingTarget),
}

/// A scriptable, recording [`Adapter`]. Built with [`StubAdapter::new`] and its builder
/// methods; read back with [`StubAdapter::calls`] and the accessors after it.
#[derive(Debug)]
pub struct StubAdapter {
    platform: Platform,
    account: AccountId,
    capabilities: Capabilities,
    connection: ConnectionCell,
    /// Edits allowed per message; `None`: it cannot edit.
    max_edits: Option<u32>,
    /// What every download gets; `None`: downloads are not supported.
    serves: Option<Downloaded>,
    /// The typing indicator it shows, renewed this often; `None`: it shows none.
    typing: Option<Option<Duration>>,
    /// Its typing indicator carries a line of text.
    typing_text: bool,
    /// The answers to the next posts, in order; once empty, a post succeeds.
    answers: Mutex<VecDeque<Result<SentMessage, SendError>>>,
    calls: Mutex<Vec<Call>>,
    /// Each successful post's id and the text it shows now.
    shown: Mutex<Vec<(MessageId, String)>>,
    runs: AtomicUsize,
    running: AtomicUsize,
    /// An event the next `run` reads once the test sends it ([`StubAdapter::next_read`]).
    read: Mutex<Option<oneshot::Receiver<InboundEvent>>>,
    /// What the sink said to each event `run` handed it.
    taken: Mutex<Vec<Result<(), NotTaken>>>,
}

impl StubAdapter {
    /// Account `account` on `platform`, in state `Connecting`: 4,000 characters a post, no
    /// threads, no edits, no typing indicator, no files; every post succeeds, as message `m0`, `m1`, ...
    pub fn new(platform: Platform, account: &str) -> StubAdapter {
        StubAdapter {
            platform,
            account: AccountId::from(account),
            capabilities: Capabilities {
                max_message_chars: 4000,
                threads: false,
                ephemeral_replies: false,
                bot_posts_reach_bots: true,
            },
            connection: ConnectionCell::default(),
            max_edits: None,
            serves: None,
            typing: None,
            typing_text: false,
            answers: Mutex::default(),
            calls: Mutex::default(),
            shown: Mutex::default(),
            runs: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            read: Mutex::default(),
            taken: Mutex::default(),
        }
    }

    /// Posts of at most `chars` characters.
    pub fn max_message_chars(mut self, chars: usize) -> StubAdapter {
        self.capabilities.max_message_chars = chars;
        self
    }

    /// Replies can go into threads.
    pub fn threads(mut self) -> StubAdapter {
        self.capabilities.threads = true;
        self
    }

    /// Starts in `state` instead of `Connecting`.
    pub fn in_state(self, state: ConnectionState) -> StubAdapter {
        self.connection.set(state);
        self
    }

    /// Messages can be edited, `max_edits` times each; one edit more panics, as a gateway that
    /// ignores [`Adapter::max_edits`] is a bug the test must show.
    pub fn editable(mut self, max_edits: u32) -> StubAdapter {
        self.max_edits = Some(max_edits);
        self
    }

    /// It shows a typing indicator, renewed every `renew_every` (`None`: never), and takes it
    /// away when asked.
    pub fn typing(mut self, renew_every: Option<Duration>) -> StubAdapter {
        self.typing = Some(renew_every);
        self
    }

    /// Its typing indicator carries the bot's progress lines ([`Adapter::typing_says`]).
    pub fn typing_text(mut self) -> StubAdapter {
        self.typing_text = true;
        self
    }

    /// Every download gets `file`.
    pub fn serving(mut self, file: Downloaded) -> StubAdapter {
        self.serves = Some(file);
        self
    }

    /// The next posts get `answers`, in order (a post past them succeeds).
    pub fn answering(self, answers: Vec<Result<SentMessage, SendError>>) -> StubAdapter {
        *lock(&self.answers) = answers.into();
        self
    }

    /// Every call so far, in the order they came.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.calls).clone()
    }

    /// Every post asked for so far (answered or not).
    pub fn sent(&self) -> Vec<OutboundMessage> {
        self.calls()
            .into_iter()
            .filter_map(|call| match call {
                Call::Send(message) => Some(message),
                _ => None,
            })
            .collect()
    }

    /// How many downloads were asked for.
    pub fn downloads(&self) -> usize {
        let calls = lock(&self.calls);
        calls
            .iter()
            .filter(|c| matches!(c, Call::Download(_)))
            .count()
    }

    /// What each successful post shows now (its last edit, or its text), in the order posted.
    pub fn shown(&self) -> Vec<(MessageId, String)> {
        lock(&self.shown).clone()
    }

    /// How many times `run` was started.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Whether a `run` is going on (its connection open) now.
    pub fn running(&self) -> bool {
        self.running.load(Ordering::SeqCst) > 0
    }

    /// The next `run` reads the event sent on the returned channel and hands it to its sink,
    /// whatever its shutdown token says by then: as a socket that read an event just before it
    /// noticed it should close. The sink's answer is kept ([`StubAdapter::taken`]).
    pub fn next_read(&self) -> oneshot::Sender<InboundEvent> {
        let (read, reader) = oneshot::channel();
        *lock(&self.read) = Some(reader);
        read
    }

    /// What the sink answered to each event `run` handed it.
    pub fn taken(&self) -> Vec<Result<(), NotTaken>> {
        lock(&self.taken).clone()
    }
}

#[async_trait]
impl Adapter for StubAdapter {
    fn platform(&self) -> Platform {
        self.platform
    }

    fn account(&self) -> &AccountId {
        &self.account
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn self_id(&self) -> Option<UserId> {
        None
    }

    fn connection(&self) -> &ConnectionCell {
        &self.connection
    }

    /// Connected until `shutdown` fires (after reading the event of [`StubAdapter::next_read`],
    /// when one was asked for), then stopped.
    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.running.fetch_add(1, Ordering::SeqCst);
        self.connection.set(ConnectionState::Connected);
        let read = lock(&self.read).take();
        if let Some(read) = read
            && let Ok(event) = read.await
        {
            let answer = sink.accept(event).await;
            lock(&self.taken).push(answer);
        }
        shutdown.cancelled().await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.connection.set(ConnectionState::Stopped);
        Ok(())
    }

    /// The next scripted answer; past the script, success as `m<n>`, the n-th post that
    /// succeeded (from 0).
    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        lock(&self.calls).push(Call::Send(message.clone()));
        let mut shown = lock(&self.shown);
        let answer = lock(&self.answers).pop_front().unwrap_or_else(|| {
            Ok(SentMessage {
                message_id: MessageId(format!("m{}", shown.len())),
            })
        });
        if let Ok(sent) = &answer {
            shown.push((sent.message_id.clone(), message.text.clone()));
        }
        answer
    }

    fn can_edit(&self) -> bool {
        self.max_edits.is_some()
    }

    fn max_edits(&self) -> Option<u32> {
        self.max_edits
    }

    async fn edit(&self, edit: &EditMessage) -> Result<(), SendError> {
        let Some(max_edits) = self.max_edits else {
            return Err(SendError::Rejected {
                code: "edit_unsupported".into(),
                message: "this stub was built without `editable`".into(),
            });
        };
        let mut calls = lock(&self.calls);
        let edits = calls
            .iter()
            .filter(|c| matches!(c, Call::Edit(e) if e.message_id == edit.message_id))
            .count();
        assert!(
            edits < max_edits as usize,
            "message {} edited past its cap of {max_edits}",
            edit.message_id
        );
        calls.push(Call::Edit(edit.clone()));
        let mut shown = lock(&self.shown);
        if let Some(post) = shown.iter_mut().find(|(id, _)| *id == edit.message_id) {
            post.1.clone_from(&edit.text);
        }
        Ok(())
    }

    async fn download(&self, file: &FileRef, _limit: u64) -> Result<Downloaded, DownloadError> {
        lock(&self.calls).push(Call::Download(file.clone()));
        self.serves.clone().ok_or(DownloadError::NotSupported)
    }

    /// Where it can edit, the post is gone from [`StubAdapter::shown`].
    async fn delete(&self, message: &DeleteMessage) -> Result<(), SendError> {
        if self.max_edits.is_none() {
            return Err(SendError::Rejected {
                code: "delete_unsupported".into(),
                message: "this stub was built without `editable`".into(),
            });
        }
        lock(&self.calls).push(Call::Delete(message.clone()));
        lock(&self.shown).retain(|(id, _)| *id != message.message_id);
        Ok(())
    }

    fn shows_typing(&self) -> bool {
        self.typing.is_some()
    }

    async fn typing_start(&self, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
        let Some(renew_every) = self.typing else {
            return Ok(None);
        };
        lock(&self.calls).push(Call::TypingStart(at.clone()));
        Ok(Some(Typing {
            renew_every,
            handle: None,
        }))
    }

    async fn typing_stop(&self, at: &TypingTarget, _typing: &Typing) -> Result<(), SendError> {
        lock(&self.calls).push(Call::TypingStop(at.clone()));
        Ok(())
    }

    fn typing_shows_text(&self) -> bool {
        self.typing_text
    }

    async fn typing_says(
        &self,
        _at: &TypingTarget,
        _typing: &Typing,
        line: &str,
    ) -> Result<(), SendError> {
        lock(&self.calls).push(Call::TypingSays(line.to_owned()));
        Ok(())
    }
}

/// A stub's lock: a test that panicked while holding one has already failed.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
