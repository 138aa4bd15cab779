//! [`LocalAdapter`]: a local bot account, an [`Adapter`] like any platform's.
//!
//! It "connects" by draining its inbox from the [`LocalHub`] into the pipeline, and "posts" by
//! writing into the hub's room. The pipeline cannot tell it from Slack, which is the point.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AccountId, Adapter, AdapterError, Backoff, Capabilities, ConnectionCell, ConnectionState,
    EventSink, Link, LinkError, MessageId, NotTaken, OutboundFile, OutboundMessage, Platform,
    Receive, SendError, SentMessage, SessionEnd, UserId, run_connection,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::hub::{Handed, HubRefusal, LocalHub, Post};
use crate::store::content_path;

/// The local channel's message limit: Slack's, so long replies are chunked as they would be.
pub const LOCAL_MAX_MESSAGE_CHARS: usize = 4000;

/// One bot's account on the local platform.
pub struct LocalAdapter {
    account: AccountId,
    bot: String,
    hub: Arc<LocalHub>,
    inbox: Mutex<Option<mpsc::UnboundedReceiver<Handed>>>,
    state: ConnectionCell,
}

impl LocalAdapter {
    /// Join `hub` as `bot`'s account `account`.
    pub fn new(hub: Arc<LocalHub>, account: AccountId, bot: String) -> Self {
        let inbox = hub.join(account.clone(), bot.clone());
        Self {
            account,
            bot,
            hub,
            inbox: Mutex::new(Some(inbox)),
            state: ConnectionCell::default(),
        }
    }
}

impl LocalAdapter {
    /// Write `post` into `room` once per `key`.
    async fn post(&self, room: &str, key: &str, post: Post) -> Result<SentMessage, SendError> {
        let id = self
            .hub
            .bot_post(room, &self.bot, key, post)
            .await
            .map_err(|refusal| match refusal {
                // Nothing was kept, or the key holds it: sending again posts it once.
                HubRefusal::StoreFailing => SendError::Transport(refusal.to_string()),
                _ => SendError::Rejected {
                    code: "local_hub_full".into(),
                    message: refusal.to_string(),
                },
            })?;
        Ok(SentMessage {
            message_id: MessageId(id),
        })
    }
}

/// The account's [`Link`]: one session that drains the inbox until shutdown. Nothing here can
/// fail in a way worth retrying, so the skeleton never waits out a backoff.
struct Drain<'a> {
    adapter: &'a LocalAdapter,
    inbox: mpsc::UnboundedReceiver<Handed>,
}

#[async_trait]
impl Link for Drain<'_> {
    async fn session(
        &mut self,
        sink: &dyn EventSink,
        shutdown: &CancellationToken,
        _: &mut Backoff,
    ) -> Result<SessionEnd, LinkError> {
        let adapter = self.adapter;
        adapter.state.set(ConnectionState::Connected);
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => break,
                event = self.inbox.recv() => event,
            };
            let Some(Handed {
                event,
                recorded,
                trace,
            }) = event
            else {
                break;
            };
            let accepted = trace.run(sink.accept(event)).await;
            adapter.hub.taken();
            if let Some(recorded) = recorded {
                // The poster may have given up waiting; the record stands either way.
                let _ = recorded.send(accepted);
            }
            // A store failure refuses this message (logged by the gateway; it stays in the
            // room's log unanswered); the account keeps listening for the next one.
            if accepted == Err(NotTaken::ShuttingDown) {
                break;
            }
        }
        Ok(SessionEnd::Shutdown)
    }
}

#[async_trait]
impl Adapter for LocalAdapter {
    fn platform(&self) -> Platform {
        Platform::Local
    }

    fn account(&self) -> &AccountId {
        &self.account
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: LOCAL_MAX_MESSAGE_CHARS,
            threads: true,
            ephemeral_replies: false,
            bot_posts_reach_bots: true,
        }
    }

    fn self_id(&self) -> Option<UserId> {
        Some(UserId(self.bot.clone()))
    }

    fn connection(&self) -> &ConnectionCell {
        &self.state
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let inbox = self.inbox.lock().expect("inbox poisoned").take();
        // Refused before the skeleton runs, so the running account's state stays as it is.
        let Some(inbox) = inbox else {
            return Err(AdapterError::Fatal(format!(
                "local account `{}` is already running",
                self.account
            )));
        };
        let mut link = Drain {
            adapter: self,
            inbox,
        };
        let never = Backoff::new(Duration::ZERO, Duration::ZERO);
        run_connection(self, &mut link, Receive::Socket, never, sink, &shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        let post = Post {
            text: message.text.clone(),
            thread: message.thread.as_ref().map(ToString::to_string),
            reply_to: message.reply_to.as_ref().map(ToString::to_string),
            ..Post::default()
        };
        self.post(message.chat.as_str(), &message.idempotency_key, post)
            .await
    }

    /// No size limit: the file is not copied anywhere, only named.
    fn max_upload_bytes(&self) -> Option<u64> {
        Some(u64::MAX)
    }

    /// The local channel shows a file as a line naming it and where `/api` serves its bytes.
    async fn upload(&self, file: &OutboundFile) -> Result<SentMessage, SendError> {
        let post = Post {
            text: format!(
                "[file] {} ({}, {} bytes): {}",
                file.name,
                file.media_type,
                file.content.len(),
                content_path(&file.artifact)
            ),
            thread: file.thread.as_ref().map(ToString::to_string),
            reply_to: file.reply_to.as_ref().map(ToString::to_string),
            ..Post::default()
        };
        self.post(file.chat.as_str(), &file.idempotency_key, post)
            .await
    }
}
