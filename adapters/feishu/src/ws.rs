//! The long connection: `/callback/ws/endpoint`, then one websocket of binary pbbp2 frames until
//! it ends, is found dead, or the gateway shuts down.
//!
//! - **Pings** go out at once and then every `PingInterval` the server names (in the endpoint's
//!   `ClientConfig`, and again in any pong), as the SDKs do.
//! - **Watchdog**: any frame from the server proves the connection alive. One that has said
//!   nothing for a ping interval plus a grace (the pong timeout) is replaced, so a socket left
//!   half-open by a laptop's sleep or a NAT timeout does not silently stop the bot.
//! - **Events** split over several frames (`sum` > 1) are rejoined ([`Fragments`]); each whole
//!   event is handed to the gateway's [`EventSink`], and only after `accept` returns is the frame
//!   acknowledged (`{"code": 200}`, echoing the frame, as the SDKs do), so an ack never covers an
//!   event a crash could lose. Events baton does not read are acknowledged too, so Feishu does not
//!   resend them.
//! - **Reconnects** are the contract's [`run_connection`](baton_contract::run_connection),
//!   waiting out its [`Backoff`] (exponential, with jitter), which a session resets once its
//!   connection has said something. A redelivery after a reconnect carries the same
//!   `event_id` and message id, and the gateway's durable dedupe drops it.

use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AdapterError, Backoff, ConnectionState, EventSink, Link, LinkError, NotTaken, SessionEnd,
};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use crate::FeishuAdapter;
use crate::api::{ApiError, seconds};
use crate::crypto;
use crate::fragments::{Assembled, Fragments};
use crate::frame::{Frame, METHOD_CONTROL, METHOD_DATA};

/// The account's [`Link`]: `bot/v3/info`, then (over the long connection) one connection after
/// another.
pub(crate) struct LongConnection<'a>(pub(crate) &'a FeishuAdapter);

#[async_trait]
impl Link for LongConnection<'_> {
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
        let settings = &adapter.settings;
        session(adapter, sink, shutdown, backoff)
            .await
            .map_err(|err| match err {
                ApiError::Auth(why) => LinkError::Fatal(AdapterError::Auth(format!(
                    "{} refused the long connection of account `{}` ({why}); check its app_id \
                     and app_secret_env, and that the app subscribes to events through the \
                     long connection",
                    settings.platform, settings.account
                ))),
                err => LinkError::Transient(format!("Feishu long connection failed: {err}")),
            })
    }
}

/// One connection, from the endpoint call to its end.
async fn session(
    adapter: &FeishuAdapter,
    sink: &dyn EventSink,
    shutdown: &CancellationToken,
    backoff: &mut Backoff,
) -> Result<SessionEnd, ApiError> {
    let settings = &adapter.settings;
    let endpoint = adapter.api.ws_endpoint().await?;
    let service = service_id(&endpoint.url);
    let (ws, _) = tokio_tungstenite::connect_async(endpoint.url.as_str())
        .await
        .map_err(handshake_error)?;
    let (mut write, mut read) = ws.split();
    adapter.state.set(ConnectionState::Connected);
    let mut ping_every = endpoint.ping_interval.unwrap_or(settings.ping_interval);
    let mut fragments = Fragments::default();
    let mut last_seen = Instant::now();
    let mut next_ping = Instant::now();
    let mut heard = false;
    loop {
        let silent_for = silent_limit(ping_every, settings.pong_timeout);
        let message = tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = write.send(Message::Close(None)).await;
                return Ok(SessionEnd::Shutdown);
            }
            _ = sleep_until(next_ping) => {
                send(&mut write, Frame::ping(service)).await?;
                next_ping = Instant::now() + ping_every;
                continue;
            }
            _ = sleep_until(last_seen + silent_for) => {
                return Ok(SessionEnd::Reconnect(format!("no frame from Feishu for {silent_for:?}")));
            }
            message = read.next() => message,
        };
        let message = match message {
            None => return Ok(SessionEnd::Reconnect("socket ended".into())),
            Some(Err(e)) => return Err(ApiError::Transport(format!("websocket: {e}"))),
            Some(Ok(message)) => message,
        };
        last_seen = Instant::now();
        if !heard {
            heard = true;
            backoff.reset();
        }
        let bytes = match message {
            Message::Binary(bytes) => bytes,
            Message::Ping(data) => {
                write
                    .send(Message::Pong(data))
                    .await
                    .map_err(|e| ApiError::Transport(format!("websocket send failed: {e}")))?;
                continue;
            }
            Message::Close(_) => return Ok(SessionEnd::Reconnect("closed by Feishu".into())),
            _ => continue,
        };
        let Ok(frame) = Frame::from_bytes(&bytes) else {
            tracing::warn!(account = %settings.account, "unreadable long-connection frame ignored");
            continue;
        };
        match frame.method {
            METHOD_CONTROL => {
                if frame.kind() == "pong"
                    && let Some(every) = frame
                        .payload
                        .as_deref()
                        .and_then(|p| serde_json::from_slice::<Value>(p).ok())
                        .and_then(|config| seconds(&config["PingInterval"]))
                {
                    ping_every = every;
                    next_ping = next_ping.min(Instant::now() + every);
                }
            }
            METHOD_DATA => {
                let started = Instant::now();
                let Some(payload) = assemble(&mut fragments, &frame) else {
                    continue;
                };
                if frame.kind() == "event" {
                    match deliver(adapter, sink, &payload).await {
                        Ok(()) => {}
                        // Not acknowledged: Feishu redelivers it to whoever runs next.
                        Err(NotTaken::ShuttingDown) => return Ok(SessionEnd::Shutdown),
                        // Not acknowledged: Feishu redelivers it once the store takes writes.
                        Err(NotTaken::StoreFailing) => continue,
                    }
                }
                let ack = frame.ack(200, started.elapsed().as_millis());
                send(&mut write, ack).await?;
            }
            _ => {}
        }
    }
}

/// The whole payload once every fragment of the frame's event is in.
fn assemble(fragments: &mut Fragments, frame: &Frame) -> Option<Vec<u8>> {
    match fragments.add_frame(frame) {
        Assembled::Complete(payload) => Some(payload),
        Assembled::Partial => None,
        Assembled::Invalid => {
            let id = frame.header("message_id").unwrap_or("");
            tracing::warn!(message_id = id, "malformed event fragment dropped");
            None
        }
    }
}

/// Hand one event to the gateway; an error when it did not take it (do not acknowledge).
async fn deliver(
    adapter: &FeishuAdapter,
    sink: &dyn EventSink,
    payload: &[u8],
) -> Result<(), NotTaken> {
    let account = &adapter.settings.account;
    let Ok(mut body) = serde_json::from_slice::<Value>(payload) else {
        tracing::warn!(%account, "long-connection event is not JSON; ignored");
        return Ok(());
    };
    if let (Some(encrypted), Some(key)) = (
        body.get("encrypt").and_then(Value::as_str),
        adapter.settings.encrypt_key.as_ref(),
    ) {
        match crypto::decrypt(key.expose(), encrypted)
            .ok()
            .and_then(|plain| serde_json::from_str(&plain).ok())
        {
            Some(plain) => body = plain,
            None => {
                tracing::warn!(%account, "long-connection event does not decrypt; check encrypt_key_env");
                return Ok(());
            }
        }
    }
    match adapter.normalize(&body).await {
        Some(event) => sink.accept(event).await,
        None => Ok(()),
    }
}

async fn send<S>(write: &mut S, frame: Frame) -> Result<(), ApiError>
where
    S: futures::Sink<Message, Error = tungstenite::Error> + Unpin,
{
    write
        .send(Message::Binary(frame.to_bytes().into()))
        .await
        .map_err(|e| ApiError::Transport(format!("websocket send failed: {e}")))
}

/// The `service_id` in the connection URL's query, which every frame we send carries.
fn service_id(url: &str) -> i32 {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "service_id")
                .and_then(|(_, v)| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A failed websocket handshake. Feishu explains refusals in `Handshake-*` headers; an auth
/// failure (514) or a forbidden app (403) will not heal by retrying.
fn handshake_error(err: tungstenite::Error) -> ApiError {
    if let tungstenite::Error::Http(response) = &err {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let status = header("handshake-status");
        let msg = header("handshake-msg");
        if status == "514" || status == "403" {
            return ApiError::Auth(format!("handshake {status}: {msg}"));
        }
        return ApiError::Transport(format!(
            "websocket handshake refused: HTTP {} {status} {msg}",
            response.status()
        ));
    }
    ApiError::Transport(format!("websocket connect failed: {err}"))
}

/// How long a connection may say nothing before it is replaced: one ping interval (a pong is
/// due by then) plus a grace of at most one more interval.
fn silent_limit(ping_every: Duration, pong_timeout: Duration) -> Duration {
    ping_every + pong_timeout.min(ping_every)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_id_comes_from_the_query() {
        assert_eq!(service_id("wss://x/ws?device_id=d1&service_id=1337"), 1337);
        assert_eq!(service_id("wss://x/ws?device_id=d1"), 0);
        assert_eq!(service_id("not a url"), 0);
    }

    #[test]
    fn a_connection_is_dead_after_one_interval_and_a_grace() {
        let s = Duration::from_secs;
        assert_eq!(silent_limit(s(120), s(10)), s(130));
        assert_eq!(silent_limit(s(1), s(10)), s(2));
    }
}
