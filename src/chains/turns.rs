//! A bot's turn in a chain: it is given the whole chain as one block (`context.rs`), takes a
//! turn in its own session in the chain's chat, and what it says is posted there — or the turn
//! goes back to the coordinator when it says nothing, fails, or runs out of time.
//!
//! The time limit is `[chains] turn_timeout_seconds`, counted from the moment the turn is given:
//! waiting for the bot's session (it may be busy answering someone) counts too, because the
//! chain waits all the same. Past it the turn is handed back with a system note; the store makes
//! sure a post racing the timeout and the timeout itself cannot both win.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use tokio::time::Instant;

use super::context::{self, Role};
use super::place::Place;
use crate::engine::{
    Caller, Heard, Recall, Seat, Services, SessionTurn, TurnEnd, TurnFailure, TurnPlan,
};
use crate::lanes::Lane;
use crate::mirror::Journal;
use crate::store::{BATON, Chain, ChainClose, ChainState, EntryKind, Origin};

/// A turn to take.
#[derive(Debug, Clone)]
pub(super) struct TurnJob {
    /// The chain, as it was when the turn was given (its `turn` is this turn's number).
    pub chain: Chain,
    /// Who takes it.
    pub bot: String,
    /// Participant (post once) or coordinator (move the turn).
    pub role: Role,
    /// What the bot is asked, or what happened while the coordinator waited.
    pub prompt: String,
}

/// Take `job` in the background (tracked, so a shutdown drains it).
pub(super) fn spawn(shared: &Arc<Services>, job: TurnJob) {
    shared.tasks().spawn(run(Arc::clone(shared), job));
}

/// Boxed rather than `async fn`: a turn posts, a post may give the next turn, and giving a turn
/// spawns this again. The named type breaks that cycle for the compiler.
fn run(shared: Arc<Services>, job: TurnJob) -> BoxFuture<'static, ()> {
    Box::pin(async move { take(&shared, job).await })
}

/// How a turn ended, for the chain.
enum Ended {
    /// The bot said this.
    Said(String, String),
    /// The bot chose silence.
    Silent,
    /// Ran past the chain's turn timeout.
    TimedOut,
    /// Failed for another reason.
    Failed(String),
}

async fn take(shared: &Arc<Services>, job: TurnJob) {
    let deadline = Instant::now() + shared.chain_turn_limit();
    let Some(place) = Place::of(&job.chain) else {
        let why = format!(
            "the chain's platform `{}` is unknown",
            job.chain.origin.platform
        );
        return finish(shared, &job, None, Ended::Failed(why)).await;
    };
    let Some(account) = place.account_of(shared, &job.bot) else {
        let why = format!("{} has no account on {} any more", job.bot, place.platform);
        return finish(shared, &job, None, Ended::Failed(why)).await;
    };
    let session = place.session(account);
    let chain = &job.chain;
    let seat = Seat {
        session: &session,
        run_id: format!("chain:{}:t{}", chain.id, chain.turn),
        lane: Lane::Nested,
    };
    let Ok(turn) = SessionTurn::enter_until(shared, seat, deadline).await else {
        return finish(shared, &job, None, Ended::TimedOut).await;
    };
    let log = shared
        .store()
        .chain_entries(&chain.id)
        .await
        .unwrap_or_else(|err| {
            tracing::error!(chain = %chain.id, %err, "could not read the chain; giving the turn without it");
            Vec::new()
        });
    let silent = &shared.config().gateway.silent_token;
    let text = context::turn_text(chain, &log, &job.bot, job.role, &job.prompt, silent);
    let plan = TurnPlan {
        bot: &account.bot,
        caller: Caller::from_chat(&session),
        history: &[],
        heard: Heard {
            speaker: BATON,
            name: BATON,
            origin: Origin::Gateway,
            text: &text,
            message_id: None,
            meta: json!({"name": BATON, "chain": chain.id, "turn": chain.turn, "role": job.role.as_str()}),
        },
        limit: deadline.saturating_duration_since(Instant::now()),
        recall: Recall::MessageOnly,
    };
    let ended = match turn.take(plan).await {
        TurnEnd::Reply { text, model, .. } => Ended::Said(text, model),
        TurnEnd::Silent { .. } => Ended::Silent,
        TurnEnd::Failed(TurnFailure::TimedOut(_)) => Ended::TimedOut,
        TurnEnd::Failed(err) => Ended::Failed(err.to_string()),
    };
    finish(shared, &job, Some(turn.journal()), ended).await;
}

/// What the chain does with how the turn ended.
async fn finish(shared: &Arc<Services>, job: &TurnJob, journal: Option<&Journal>, ended: Ended) {
    let (chain, bot, turn) = (&job.chain, job.bot.as_str(), job.chain.turn);
    let seconds = shared.chain_turn_limit().as_secs();
    if let Ended::Said(text, model) = &ended {
        say(shared, job, journal, text, model).await;
    }
    match job.role {
        Role::Participant => {
            let reason = match ended {
                Ended::Said(..) => return,
                Ended::Silent => format!("{bot} passed without posting"),
                Ended::TimedOut => format!("{bot}'s turn timed out after {seconds} s"),
                Ended::Failed(err) => format!("{bot}'s turn failed: {err}"),
            };
            super::hand_back(shared, chain, turn, reason).await;
        }
        Role::Coordinator => {
            // The coordinator was woken to move the turn. If the turn is still where it was,
            // nobody else will move it: the chain ends rather than hang open.
            let reason = match ended {
                Ended::TimedOut => format!("the coordinator {bot} did not act within {seconds} s"),
                Ended::Failed(err) => format!("the coordinator {bot}'s turn failed: {err}"),
                Ended::Said(..) | Ended::Silent => format!(
                    "the coordinator {bot} ended its turn without handing the turn on or closing \
                     the chain"
                ),
            };
            let stall = ChainClose {
                state: ChainState::Stalled,
                by: BATON.to_owned(),
                reason,
                at_turn: Some(turn),
            };
            if let Err(err) = super::close(shared, &chain.id, stall).await {
                tracing::error!(chain = %chain.id, %err, "could not close a stalled chain");
            }
        }
    }
}

/// The bot's reply is its post, unless it posted with `chain_message` already in this turn or
/// the turn is no longer its own (timed out, chain closed): then it is only recorded.
async fn say(
    shared: &Arc<Services>,
    job: &TurnJob,
    journal: Option<&Journal>,
    text: &str,
    model: &str,
) {
    let (chain, bot) = (&job.chain, job.bot.as_str());
    let now = shared.store().chain(&chain.id).await.ok().flatten();
    let why_not = match now {
        None => "the chain could not be read".to_owned(),
        Some(now) if now.state != ChainState::Open => format!("the chain is {}", now.state),
        Some(now) if now.holder.as_deref() != Some(bot) => {
            format!("the turn had moved on to {}", now.holder_name())
        }
        Some(_) if super::posted_in_turn(shared, &chain.id, bot, chain.turn).await => {
            "already posted with chain_message in this turn".to_owned()
        }
        Some(_) => match super::post(shared, &chain.id, bot, text).await {
            Ok(_) => return,
            Err(refused) => refused.to_string(),
        },
    };
    if let Some(journal) = journal {
        let meta = json!({"model": model, "posted": false, "chain": chain.id, "why": why_not});
        journal.bot_did(EntryKind::Answer, text, meta).await;
    }
}
