//! The [`Adapter`] trait: the one seam between the gateway and a platform.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::connection::{ConnectionCell, ConnectionState, Receive, Trouble};
use crate::feedback::{DeleteMessage, EditMessage, Preview, Typing, TypingTarget};
use crate::files::{DownloadError, Downloaded, FileRef};
use crate::ids::{AccountId, ChatId, Platform, UserId};
use crate::inbound::InboundEvent;
use crate::native_stream::{StreamFor, StreamStart, StreamText};
use crate::outbound::{OutboundMessage, SendError, SentMessage};
use crate::sibling_post::SiblingPost;
use crate::upload::OutboundFile;
use crate::webhook::{WebhookRequest, WebhookResponse};

/// What a platform can do, so the gateway shapes replies to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Longest message the platform accepts, in characters (Discord 2000, Slack and Feishu 4000).
    pub max_message_chars: usize,
    /// Replies can go into threads.
    pub threads: bool,
    /// Native commands can be answered privately (ephemeral).
    pub ephemeral_replies: bool,
    /// The platform delivers one bot's posts to the other bots in the chat (Slack, Discord, the
    /// local channel). Where it does not (Feishu/Lark), the gateway hands each post of a baton
    /// bot to the other baton bots in that chat itself, so bots see each other everywhere.
    pub bot_posts_reach_bots: bool,
}

/// Why the gateway did not take an event. The adapter must not acknowledge it, so that the
/// platform delivers it again later: nothing is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotTaken {
    /// The gateway closed its intake for shutdown, or for this account: this instance no
    /// longer holds its lease, so the event must go to the one that does. Either way the
    /// adapter ends its session without acknowledging it.
    #[error("the gateway is shutting down and takes no new events")]
    ShuttingDown,
    /// The gateway could not record the event (a full disk, a read-only database), and
    /// answering without a record is not allowed.
    #[error("the gateway cannot record events now (its store is failing); see its log")]
    StoreFailing,
}

/// Where an adapter hands normalized events.
///
/// `accept` returns once the gateway has taken responsibility for the event (it is durably
/// recorded or known to be a duplicate). Adapters acknowledge the platform *after* it returns,
/// and must not do slow work before calling it: platforms redeliver after ~3 s.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Take one event.
    async fn accept(&self, event: InboundEvent) -> Result<(), NotTaken>;
}

/// A failure that stops an adapter: bad credentials, or a platform that refuses us for good.
/// Transient failures are retried inside the adapter and never surface here.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The platform rejected our credentials; fix the token named by the account's `*_env` key.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The credentials work but lack a scope or intent the account needs; add it on the
    /// platform (`baton setup` prints what the account needs).
    #[error("missing permission: {0}")]
    Permission(String),
    /// Any other fatal problem, described for the operator.
    #[error("{0}")]
    Fatal(String),
}

impl AdapterError {
    /// The trouble this is, as the account's connection shows it: refused credentials or a
    /// missing permission; `None` for the other fatal errors (a setting the adapter cannot use).
    pub fn trouble(&self) -> Option<Trouble> {
        match self {
            AdapterError::Auth(_) => Some(Trouble::InvalidToken),
            AdapterError::Permission(_) => Some(Trouble::MissingScope),
            AdapterError::Fatal(_) => None,
        }
    }
}

/// One account's connection to one platform.
///
/// The gateway calls [`Adapter::run`] once, in its own task. Sends may happen concurrently
/// with `run` and with each other.
#[async_trait]
pub trait Adapter: Send + Sync + 'static {
    /// Which platform this adapter speaks.
    fn platform(&self) -> Platform;

    /// Which account it logs in as.
    fn account(&self) -> &AccountId;

    /// Limits the gateway must respect when posting.
    fn capabilities(&self) -> Capabilities;

    /// The account's own platform user id, once known (after `auth.test`, READY, `bot/v3/info`).
    /// The gateway uses it to resolve mentions of this bot and to recognise its messages.
    fn self_id(&self) -> Option<UserId>;

    /// The connection's state, kept where the gateway can watch it.
    fn connection(&self) -> &ConnectionCell;

    /// The connection's state right now.
    fn connection_state(&self) -> ConnectionState {
        self.connection().get()
    }

    /// How the account receives its events. A socket account is connected by one instance at a
    /// time (the holder of its lease, when several share a database); webhooks may reach any.
    /// The default: webhooks (nothing to hold).
    fn receive(&self) -> Receive {
        Receive::Webhooks
    }

    /// Connect and feed events to `sink` until `shutdown` fires, reconnecting with backoff on
    /// transient failures. Webhook-only adapters just mark themselves connected and wait.
    /// [`run_connection`](crate::run_connection) is that skeleton; an adapter hands it a
    /// [`Link`](crate::Link) with what is its own.
    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError>;

    /// Post one chunk.
    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError>;

    /// Whether this account is in `chat`. Asked (where [`Capabilities::bot_posts_reach_bots`] is
    /// false) before the gateway hands it another baton bot's post there, so a bot never hears
    /// a chat it is not in, nor a direct conversation of another bot. The default says yes.
    async fn in_chat(&self, chat: &ChatId) -> Result<bool, SendError> {
        let _ = chat;
        Ok(true)
    }

    /// Another baton bot's post (as the gateway sent it) as this account would have received
    /// it: mention markup made readable, the structural mentions in it resolved to the platform
    /// ids the gateway knows, and whether it replies to this account's own message. The
    /// default reads the text as it is, mentioning nobody.
    fn read_sibling_post(&self, post: &OutboundMessage) -> SiblingPost {
        SiblingPost::plain(&post.text)
    }

    /// Whether [`Adapter::edit`] works here: a reply can then stream in by editing its posts.
    fn can_edit(&self) -> bool {
        false
    }

    /// How many times one message may be edited, where the platform caps it (Feishu: 20).
    fn max_edits(&self) -> Option<u32> {
        None
    }

    /// Replace the text of a message this account posted, with exactly one request. A 429 is
    /// [`SendError::RateLimited`], so the gateway can wait and send the newest text.
    async fn edit(&self, edit: &EditMessage) -> Result<(), SendError> {
        let _ = edit;
        Err(SendError::Rejected {
            code: "edit_unsupported".into(),
            message: "this platform's adapter cannot edit messages".into(),
        })
    }

    /// Delete a message this account posted, with exactly one request (where
    /// [`Adapter::can_edit`] holds, this works too: a streamed draft can then be taken back).
    async fn delete(&self, message: &DeleteMessage) -> Result<(), SendError> {
        let _ = message;
        Err(SendError::Rejected {
            code: "delete_unsupported".into(),
            message: "this platform's adapter cannot delete messages".into(),
        })
    }

    /// Whether a reply to `chat` can be previewed while it is written without posting it
    /// ([`Adapter::preview`]): `stream = "native"` then shows it there and posts it whole at
    /// the end. The default: no.
    fn previews_in(&self, chat: &ChatId) -> bool {
        let _ = chat;
        false
    }

    /// Show the reply so far as a preview, with exactly one request (a 429 is
    /// [`SendError::RateLimited`]). The default refuses.
    async fn preview(&self, preview: &Preview) -> Result<(), SendError> {
        let _ = preview;
        Err(SendError::Rejected {
            code: "preview_unsupported".into(),
            message: "this platform's adapter cannot preview replies".into(),
        })
    }

    /// Whether a reply to `chat` can stream by the platform's own streaming
    /// ([`Adapter::stream_start`]): `stream = "native"` then uses it. The default: no.
    fn streams_in(&self, chat: &ChatId) -> bool {
        let _ = chat;
        false
    }

    /// Post `message` as the start of a live stream for `to`, with exactly one attempt
    /// (a 429 is [`SendError::RateLimited`], nothing posted); where the platform refuses the
    /// stream, post it as an ordinary message instead ([`StreamStart::Posted`]). The default
    /// posts it.
    async fn stream_start(
        &self,
        message: &OutboundMessage,
        to: &StreamFor,
    ) -> Result<StreamStart, SendError> {
        let _ = to;
        self.send(message).await.map(StreamStart::Posted)
    }

    /// Make a live stream show `update.text`, which extends what it shows, with one request.
    async fn stream_update(&self, update: &StreamText) -> Result<(), SendError> {
        let _ = update;
        Err(SendError::Rejected {
            code: "stream_unsupported".into(),
            message: "this platform's adapter cannot stream replies".into(),
        })
    }

    /// End a live stream showing exactly `end.text` (which need not extend what it shows).
    /// A stream that ended already (a restart) is edited to the text where the platform can.
    async fn stream_end(&self, end: &StreamText) -> Result<(), SendError> {
        let _ = end;
        Err(SendError::Rejected {
            code: "stream_unsupported".into(),
            message: "this platform's adapter cannot stream replies".into(),
        })
    }

    /// Whether [`Adapter::typing_start`] can show anything here (it is overridden). The gateway
    /// records every indicator before it is put up, so a crash cannot leave one up; an adapter
    /// that shows none is spared those two store writes per turn.
    fn shows_typing(&self) -> bool {
        false
    }

    /// Show that the bot is working on an answer to `at` (called again every
    /// [`Typing::renew_every`]). `Ok(None)`: nothing to show here (the platform has no
    /// indicator, or the app lacks the scope for it).
    async fn typing_start(&self, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
        let _ = at;
        Ok(None)
    }

    /// Take the indicator `typing_start` showed away again.
    async fn typing_stop(&self, at: &TypingTarget, typing: &Typing) -> Result<(), SendError> {
        let _ = (at, typing);
        Ok(())
    }

    /// Whether the indicator can carry a line of text ([`Adapter::typing_says`] is overridden):
    /// then the gateway shows the bot's latest `progress` line on it while the turn runs.
    fn typing_shows_text(&self) -> bool {
        false
    }

    /// Make the indicator `typing_start` showed say `line` (the bot's latest progress), with
    /// exactly one request. The default shows nothing: a plain indicator stays as it is.
    async fn typing_says(
        &self,
        at: &TypingTarget,
        typing: &Typing,
        line: &str,
    ) -> Result<(), SendError> {
        let _ = (at, typing, line);
        Ok(())
    }

    /// The largest file [`Adapter::upload`] can post here, in bytes; `None`: this adapter
    /// posts no files (the default). The gateway refuses a bigger attachment when the bot
    /// attaches it, with the limit in the tool's result, rather than fail at delivery.
    fn max_upload_bytes(&self) -> Option<u64> {
        None
    }

    /// Post one file (an artifact attached to a reply), as its own message, with exactly one
    /// attempt: a 429 is [`SendError::RateLimited`] (nothing was posted), and the gateway
    /// retries with the same idempotency key, as for text. The default refuses.
    async fn upload(&self, file: &OutboundFile) -> Result<SentMessage, SendError> {
        let _ = file;
        Err(SendError::Rejected {
            code: "upload_unsupported".into(),
            message: "this platform's adapter cannot post files".into(),
        })
    }

    /// Fetch a file posted in a chat (an [`InboundFile`](crate::InboundFile)'s `source`) with
    /// this account's credentials, refusing it without reading it all when it is over `limit`
    /// bytes ([`fetch`](crate::fetch)). The default cannot fetch files.
    async fn download(&self, file: &FileRef, limit: u64) -> Result<Downloaded, DownloadError> {
        let _ = (file, limit);
        Err(DownloadError::NotSupported)
    }

    /// Handle a request to `/hooks/<platform>/<account>`. Verify before parsing; hand events to
    /// `sink`; answer within the platform's deadline. The default refuses: no webhook mode.
    async fn webhook(&self, request: WebhookRequest, sink: &dyn EventSink) -> WebhookResponse {
        let _ = (request, sink);
        WebhookResponse::error(404, "this account does not take webhooks; check its `mode`")
    }
}
