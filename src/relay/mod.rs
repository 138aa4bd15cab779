//! Bot-to-bot traffic: `sessions_send` deliveries, their durable record,
//! and messages pushed into a session from outside its chat.
//!
//! ```text
//!  sessions_send ─▶ guards (rules) ─▶ store: find-or-insert ─▶ guards (budgets)
//!                                            │ existing run: its result, or wait for it
//!                                            ▼
//!                 nested lane ─▶ target's turn ─▶ settle ─▶ waiting sender gets the reply
//!                                                    └──▶ nobody waiting: pushed to the
//!                                                         sender's session (wakes it)
//! ```
//!
//! Two failure modes shape it. A sender that times out and retries must not make the target work
//! twice: the delivery row is found again by idempotency key or by the same text within 10
//! minutes ([`send`]). A reply that comes after the sender gave up must not vanish: whoever is
//! left holding it pushes it to the sender's session ([`waiters`], [`wake`]). Runs left open
//! by a restart, or by an instance that is gone, are resumed or failed, on the record
//! ([`recover`]).
//!
//! With several instances on one database, a delivery runs on its target's home (`home.rs`):
//! the sender's instance writes the row and hands it over with a notice; the home claims it and
//! runs it; the sender's waiter, on its own instance, is woken by the settle's notice.

mod a2a_out;
mod cancel;
mod handle;
mod handoff;
mod home;
mod ping_pong;
mod recover;
mod run;
mod send;
mod task_resume;
mod waiters;
mod wake;

use serde_json::Value;

pub use cancel::cancel;
pub use handle::{BuildError, Relay, RelayState};
pub use handoff::{SchemaError, check_schema};
pub use recover::{recover, serve};
pub use send::{RunReport, SendError, SendOutcome, SendRequest, Sent, send};
pub use task_resume::resume_task;
pub(crate) use waiters::{Committing, Finished, HandAt, Handing, Listening, Waited};
pub use waiters::{RunResult, Waiters};

use crate::bot_id::BotId;
use crate::engine::{Caller, Engine};
use crate::events::Event;
use crate::session::SessionKey;
use crate::store::{Delivery, DeliveryState, NewDelivery, Origin};

/// A message for a session that did not come from its chat: another bot's late reply, a human's
/// answer to an escalation, an approval decision. It wakes the session's bot for a turn on the
/// nested lane (after whatever turn the session is running); the bot's reply is posted to the
/// session's chat when the session has one. Kept as JSON while it is handed to another
/// instance (`wake.rs`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SessionMessage {
    /// The session to wake.
    pub session: SessionKey,
    /// Who speaks: `bot:<id>` for a bot, a human's id or name.
    pub speaker: String,
    /// Human, bot or gateway.
    pub origin: Origin,
    /// The text the bot is given (already prefixed, e.g. `Message from bot 'caid': ...`).
    pub text: String,
    /// Correlates the woken turn with what caused it (a delivery's run id, an escalation id).
    pub run_id: String,
    /// Anything worth keeping in the transcript entry.
    pub meta: Value,
    /// Who the woken turn calls tools as.
    pub caller: Caller,
    /// The delivery whose outcome this message tells the sender about, if any: it is marked
    /// notified once the message is on record, so a restart neither loses nor repeats it.
    pub delivery: Option<String>,
    /// The `traceparent` of what it answers (a delivery's `sessions_send`): the woken turn's
    /// trace links to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
    /// The A2A task (its delivery's run id) the woken turn continues: an answer to the
    /// question the bot asked in it. The turn's answer settles the task (`task_resume.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// Wake `message.session`'s bot with `message`, in the background (tracked, so a shutdown
/// drains it), on the home instance of the session's bot (`home.rs`): here, or handed to it.
pub fn post_to_session(engine: &Engine, message: SessionMessage) {
    let task_shared = engine.clone();
    engine
        .tasks()
        .spawn(async move { wake::on_home(&task_shared, message).await });
}

/// `run_id`'s delivery once it has settled, or as it stands when `timeout` runs out (the run
/// goes on). `None` when no such delivery is on record.
pub async fn settled(
    relay: &Relay,
    run_id: &str,
    timeout: std::time::Duration,
) -> Result<Option<Delivery>, crate::store::StoreError> {
    let store = relay.engine().store();
    match relay
        .waiters()
        .wait(store, run_id, timeout, Listening::FromNow)
        .await?
    {
        Waited::Got(d) => Ok(Some(*d)),
        Waited::Handed(_) | Waited::GaveUp => store.delivery(run_id).await,
    }
}

/// What a bot is given when another bot speaks to it.
fn from_bot(sender: &BotId, text: &str) -> String {
    format!("Message from bot '{sender}': {text}")
}

/// Who speaks a delivery's message to its target, as the transcript names them: `bot:<id>`,
/// or `a2a:<caller>` for an external A2A agent.
fn speaker(d: &Delivery) -> String {
    match d.sender_session.a2a_peer() {
        Some(caller) => format!("a2a:{caller}"),
        None => format!("bot:{}", d.sender),
    }
}

/// What the target is given for a delivery's message.
fn from_sender(d: &Delivery) -> String {
    match d.sender_session.a2a_peer() {
        Some(caller) => format!("Message from A2A agent '{caller}': {}", d.message),
        None => from_bot(&d.sender, &d.message),
    }
}

/// Who a delivery goes between, for its events.
struct Route<'a> {
    run_id: &'a str,
    sender: &'a BotId,
    sender_session: &'a SessionKey,
    target: &'a BotId,
    target_session: &'a SessionKey,
}

impl<'a> From<&'a Delivery> for Route<'a> {
    fn from(d: &'a Delivery) -> Self {
        Route {
            run_id: &d.run_id,
            sender: &d.sender,
            sender_session: &d.sender_session,
            target: &d.target,
            target_session: &d.target_session,
        }
    }
}

impl<'a> From<&'a NewDelivery> for Route<'a> {
    fn from(d: &'a NewDelivery) -> Self {
        Route {
            run_id: &d.run_id,
            sender: &d.sender,
            sender_session: &d.sender_session,
            target: &d.target,
            target_session: &d.target_session,
        }
    }
}

/// A delivery moved to `state` (with the refusal or failure `reason`, the answering `model`):
/// announced on the event stream, the one place every move of a delivery passes.
fn moved<'a>(
    engine: &Engine,
    route: impl Into<Route<'a>>,
    state: DeliveryState,
    reason: Option<&str>,
    model: Option<&str>,
) {
    let route = route.into();
    engine.events().emit(Event::Delivery {
        run_id: route.run_id.to_owned(),
        sender: route.sender.clone(),
        sender_session: route.sender_session.render(),
        target: route.target.clone(),
        target_session: route.target_session.render(),
        state: state.as_str().to_owned(),
        reason: reason.map(str::to_owned),
        model: model.map(str::to_owned),
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::gateway::testing::{begun, echo_config, new_delivery, parts};
    use crate::session::A2aCaller;

    /// A delivery's message is spoken to its target by the sending bot, or by the external
    /// A2A agent whose caller session sent it, and introduced as such.
    #[tokio::test]
    async fn a_delivery_is_spoken_by_its_bot_or_its_a2a_caller() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let d = begun(&gw.engine, new_delivery("r1", "alpha", "beta", "hi"), None).await;
        assert_eq!(speaker(&d), "bot:alpha");
        assert_eq!(from_sender(&d), "Message from bot 'alpha': hi");
        let caller = A2aCaller::parse("acme").unwrap();
        let from_agent = Delivery {
            sender_session: SessionKey::a2a_caller(&d.target, "beta".into(), &caller),
            ..d
        };
        assert_eq!(speaker(&from_agent), "a2a:acme");
        assert_eq!(
            from_sender(&from_agent),
            "Message from A2A agent 'acme': hi"
        );
    }

    /// Waiting for a run no delivery has finds nothing; for one still queued when the time
    /// runs out, the delivery as it stands.
    #[tokio::test]
    async fn settled_finds_no_unknown_run_and_gives_a_pending_one_as_it_stands() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let wait = Duration::from_millis(20);
        assert_eq!(settled(&gw.relay, "nope", wait).await.unwrap(), None);
        begun(&gw.engine, new_delivery("r1", "alpha", "beta", "hi"), None).await;
        let pending = settled(&gw.relay, "r1", wait).await.unwrap();
        assert_eq!(pending.map(|d| d.state), Some(DeliveryState::Queued));
    }

    /// Every move of a delivery is announced on the event stream with its route, its state
    /// and why.
    #[tokio::test]
    async fn a_move_of_a_delivery_is_announced_with_its_route_and_why() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let mut stream = gw.engine.events().subscribe(None).live;
        let d = begun(&gw.engine, new_delivery("r1", "alpha", "beta", "hi"), None).await;
        moved(&gw.engine, &d, DeliveryState::Refused, Some("depth"), None);
        let told = stream.try_recv().expect("announced").event.clone();
        let Event::Delivery {
            run_id,
            sender,
            target,
            target_session,
            state,
            reason,
            ..
        } = told
        else {
            panic!("not a delivery's move: {told:?}");
        };
        assert_eq!(
            (run_id.as_str(), sender.as_str(), target.as_str()),
            ("r1", "alpha", "beta")
        );
        assert_eq!(target_session, d.target_session.render());
        assert_eq!(
            (state.as_str(), reason.as_deref()),
            ("refused", Some("depth"))
        );
    }
}
