//! Socket Mode: `apps.connections.open`, then one websocket until Slack says `disconnect`.
//!
//! Each envelope is handed to the gateway's [`EventSink`] and acknowledged only after `accept`
//! returns: the event is then durably claimed, so an ack never covers an event that a crash
//! could lose, and `accept` is quick enough for Slack's 3 s. A redelivery (`retry_attempt` > 0)
//! carries the same `event_id` and message, so the gateway's dedupe drops it; nothing here
//! needs to remember envelopes. Reconnects (after `disconnect`, a closed socket or a failed
//! open) are the contract's [`run_connection`](baton_contract::run_connection); a session resets
//! its [`Backoff`] once Slack says `hello`.

use async_trait::async_trait;
use baton_contract::{
    AdapterError, Backoff, ConnectionState, EventSink, Link, LinkError, NotTaken, SessionEnd,
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::SlackAdapter;
use crate::api::ApiError;

/// The account's [`Link`]: `auth.test`, then (in Socket Mode) one websocket after another.
pub(crate) struct SocketMode<'a>(pub(crate) &'a SlackAdapter);

#[async_trait]
impl Link for SocketMode<'_> {
    async fn identify(&mut self) -> Result<(), LinkError> {
        self.0.identify().await
    }

    async fn session(
        &mut self,
        sink: &dyn EventSink,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<SessionEnd, LinkError> {
        let adapter = self.0;
        session(adapter, sink, shutdown, backoff)
            .await
            .map_err(|err| match err {
                ApiError::Auth(code) => LinkError::Fatal(AdapterError::Auth(format!(
                    "Slack refused the app-level token of account `{}` ({code}); check its \
                     app_token_env (xapp-..., with the connections:write scope)",
                    adapter.settings.account
                ))),
                ApiError::Slack(code) if code == "missing_scope" => {
                    LinkError::Fatal(AdapterError::Permission(format!(
                        "Slack refused to open a socket for account `{}` (missing_scope); give \
                         its app-level token the connections:write scope",
                        adapter.settings.account
                    )))
                }
                err => LinkError::Transient(format!("Slack socket failed: {err}")),
            })
    }
}

/// One websocket, from `apps.connections.open` to its end.
async fn session(
    adapter: &SlackAdapter,
    sink: &dyn EventSink,
    shutdown: &CancellationToken,
    backoff: &mut Backoff,
) -> Result<SessionEnd, ApiError> {
    let url = adapter.api.connections_open().await?;
    let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .map_err(|e| ApiError::Transport(format!("websocket connect failed: {e}")))?;
    let (mut write, mut read) = ws.split();
    loop {
        let frame = tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = write.send(Message::Close(None)).await;
                return Ok(SessionEnd::Shutdown);
            }
            frame = read.next() => frame,
        };
        let message = match frame {
            None => return Ok(SessionEnd::Reconnect("socket ended".into())),
            Some(Err(e)) => return Err(ApiError::Transport(format!("websocket: {e}"))),
            Some(Ok(message)) => message,
        };
        let text = match message {
            Message::Text(text) => text,
            Message::Ping(data) => {
                send(&mut write, Message::Pong(data)).await?;
                continue;
            }
            Message::Close(_) => return Ok(SessionEnd::Reconnect("closed by Slack".into())),
            _ => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(text.as_str()) else {
            tracing::warn!(account = %adapter.settings.account, "unreadable Socket Mode frame ignored");
            continue;
        };
        let kind = envelope.get("type").and_then(Value::as_str).unwrap_or("");
        let event = match kind {
            "hello" => {
                adapter.state.set(ConnectionState::Connected);
                backoff.reset();
                continue;
            }
            "disconnect" => {
                let reason = envelope.get("reason").and_then(Value::as_str).unwrap_or("");
                return Ok(SessionEnd::Reconnect(format!("disconnect: {reason}")));
            }
            "events_api" => adapter.normalize_event(&envelope["payload"]),
            "slash_commands" => adapter.normalize_command(&envelope["payload"]),
            _ => None,
        };
        if let Some(event) = event {
            match sink.accept(event).await {
                Ok(()) => {}
                // Not acked: Slack redelivers it to whoever runs next.
                Err(NotTaken::ShuttingDown) => return Ok(SessionEnd::Shutdown),
                // Not acked: Slack redelivers it, by when the store may take writes again.
                Err(NotTaken::StoreFailing) => continue,
            }
        }
        if let Some(id) = envelope.get("envelope_id").and_then(Value::as_str) {
            let ack = json!({ "envelope_id": id }).to_string();
            send(&mut write, Message::text(ack)).await?;
        }
    }
}

async fn send<S>(write: &mut S, message: Message) -> Result<(), ApiError>
where
    S: futures::Sink<Message, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
{
    write
        .send(message)
        .await
        .map_err(|e| ApiError::Transport(format!("websocket send failed: {e}")))
}
