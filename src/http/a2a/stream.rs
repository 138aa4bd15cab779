//! A task followed over SSE, for a streaming send and a subscription in both bindings: the
//! task, `working`, each progress line, the reply in chunks as the bot writes it, and the final
//! status. The binding only says how each event is framed.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};

use super::error::A2aError;
use super::tasks::{accept, task_by_id, waits_on};
use super::wire::{final_status, status, task, wrapped};
use crate::events::{Event, Stamped};
use crate::relay::{self, Relay};
use crate::roster::Bot;
use crate::store::{Delivery, DeliveryState};

/// How long a streamed send or a subscription follows a task before it ends the stream with
/// the task as it stands.
const FOLLOW_FOR: Duration = Duration::from_secs(30 * 60);

/// What a stream follows.
pub(super) enum Follow<'a> {
    /// The task a message (the send request's JSON) starts or answers.
    Send(&'a Value),
    /// Task `id`, as it stands and from then on.
    Task(&'a str),
}

/// Open the stream of `what`: its events, each framed by `frame`, or the error that kept it
/// from opening (an invalid message, an unknown task), for the binding to answer unstreamed.
pub(super) async fn follow<F>(
    relay: &Relay,
    bot: &Bot,
    what: Follow<'_>,
    base: String,
    frame: F,
) -> Result<Response, A2aError>
where
    F: Fn(Value) -> Value + Send + Sync + 'static,
{
    // Subscribed before the task is read: no progress line falls between the two.
    let live = relay.engine().events().subscribe(None).live;
    let d = match what {
        Follow::Send(params) => {
            let accepted = accept(relay, bot, params, Duration::ZERO).await?;
            as_accepted(accepted.into_row(relay.engine(), bot).await?)
        }
        Follow::Task(id) => task_by_id(relay.engine(), bot, id).await?,
    };
    Ok(stream(relay.clone(), d, live, base, frame))
}

/// A task a streamed send started, as it was accepted. Its turn may end before the stream
/// opens; the stream still tells it in order (submitted, working, the reply, the end) rather
/// than starting at the end. A task refused before any turn ran stands as it is.
fn as_accepted(d: Delivery) -> Delivery {
    if !d.state.is_settled() || d.started_ms.is_none() {
        return d;
    }
    Delivery {
        state: DeliveryState::Queued,
        reason: None,
        reply: None,
        finished_ms: None,
        artifacts_out: Vec::new(),
        ..d
    }
}

/// Stream a task over SSE: the task as it stands, `working` while it runs (again with each
/// progress line the bot reports), its reply in chunks as the bot writes it, and its final
/// status (`input-required` with the question the bot asked, if it asked one). A
/// client that goes away leaves the task running. `live` was subscribed before `d` was read:
/// no progress line falls between the two.
fn stream<F>(
    relay: Relay,
    d: Delivery,
    mut live: broadcast::Receiver<Arc<Stamped>>,
    base: String,
    frame: F,
) -> Response
where
    F: Fn(Value) -> Value + Send + Sync + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    // Opened before the task is read again: the turn finds it with its next piece of text, and
    // a tap found late is first given all of the text so far.
    let mut tap = relay.engine().taps().open_run(&d.run_id);
    tokio::spawn(async move {
        let send = |result: Value| {
            tx.send(Ok::<_, Infallible>(
                SseEvent::default().data(frame(result).to_string()),
            ))
            .is_ok()
        };
        let engine = relay.engine();
        let asked = waits_on(engine, &d).await.ok().flatten();
        if !send(wrapped("task", task(&d, asked.as_ref(), &base))) {
            return;
        }
        let mut chunks = ReplyChunks::default();
        let d = if d.state.is_settled() {
            d
        } else {
            let working = status(&d, DeliveryState::Running);
            if !send(wrapped("statusUpdate", update(&d, working))) {
                return;
            }
            // Lines on the row may come live too: each is told once.
            let mut told: Vec<String> = Vec::with_capacity(d.progress.len());
            for line in &d.progress {
                send(wrapped(
                    "statusUpdate",
                    update(&d, progress(&d, &line.message)),
                ));
                told.push(line.message.clone());
            }
            let run_id = d.run_id.clone();
            let settle = relay::settled(&relay, &run_id, FOLLOW_FOR);
            tokio::pin!(settle);
            let settled = loop {
                tokio::select! {
                    settled = &mut settle => break settled,
                    Some(piece) = tap.pieces.recv() => {
                        if !chunks.add(&d, piece, &send) {
                            return;
                        }
                    }
                    heard = live.recv() => match heard {
                        Ok(stamped) => {
                            let Event::Progress { run_id, message, .. } = &stamped.event else {
                                continue;
                            };
                            if *run_id != d.run_id {
                                continue;
                            }
                            if let Some(at) = told.iter().position(|t| t == message) {
                                told.swap_remove(at);
                            } else if !send(wrapped("statusUpdate", update(&d, progress(&d, message)))) {
                                return;
                            }
                        }
                        // Lines missed by a slow reader are on the task's row.
                        Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => break (&mut settle).await,
                    },
                }
            };
            // Written before the run settled: all of it is in the tap by now.
            while let Ok(piece) = tap.pieces.try_recv() {
                if !chunks.add(&d, piece, &send) {
                    return;
                }
            }
            match settled {
                Ok(Some(settled)) => settled,
                Ok(None) | Err(_) => d,
            }
        };
        let asked = waits_on(engine, &d).await.ok().flatten();
        if let Some(reply) = d
            .reply
            .as_deref()
            .filter(|r| !r.is_empty() && asked.is_none())
        {
            chunks.end(&d, reply, &send);
        }
        send(wrapped(
            "statusUpdate",
            update(&d, final_status(&d, asked.as_ref())),
        ));
    });
    let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
    Sse::new(events).into_response()
}

/// The reply streamed as the bot writes it: appended chunks of the task's `reply` artifact,
/// each piece sent when the next one comes, so the last can say it is the last.
#[derive(Default)]
struct ReplyChunks {
    /// What the chunks sent so far hold.
    sent: String,
    /// The newest piece, not sent yet.
    held: Option<String>,
}

impl ReplyChunks {
    /// A piece of the reply as written: the one held before goes out. False once the client
    /// is gone.
    fn add(&mut self, d: &Delivery, piece: String, send: &impl Fn(Value) -> bool) -> bool {
        match self.held.replace(piece) {
            Some(held) => self.send(d, held, false, send),
            None => true,
        }
    }

    /// The turn ended with `reply`: the rest of it as the last chunk, or, when what was
    /// streamed is not how the reply begins (text the model took back), the whole reply in
    /// place of it.
    fn end(&mut self, d: &Delivery, reply: &str, send: &impl Fn(Value) -> bool) {
        let held = self.held.take().unwrap_or_default();
        let streamed = format!("{}{held}", self.sent);
        match reply.strip_prefix(streamed.as_str()) {
            Some(rest) => self.send(d, held + rest, true, send),
            None => {
                self.sent.clear();
                self.send(d, reply.to_owned(), true, send)
            }
        };
    }

    fn send(
        &mut self,
        d: &Delivery,
        text: String,
        last: bool,
        send: &impl Fn(Value) -> bool,
    ) -> bool {
        let event = json!({
            "taskId": d.run_id,
            "contextId": d.target_session.render(),
            "artifact": {"artifactId": "reply", "name": "reply", "parts": [{"text": text}]},
            "append": !self.sent.is_empty(),
            "lastChunk": last,
        });
        self.sent.push_str(&text);
        send(wrapped("artifactUpdate", event))
    }
}

/// A `working` status carrying a progress line the bot reported.
fn progress(d: &Delivery, line: &str) -> Value {
    let mut working = status(d, DeliveryState::Running);
    working["message"] = json!({
        "messageId": format!("{}-progress-{}", d.run_id, uuid::Uuid::new_v4().simple()),
        "taskId": d.run_id,
        "contextId": d.target_session.render(),
        "role": "ROLE_AGENT",
        "parts": [{"text": line}],
    });
    working
}

fn update(d: &Delivery, status: Value) -> Value {
    let mut update = json!({"taskId": d.run_id, "contextId": d.target_session.render()});
    update["status"] = status;
    update
}
