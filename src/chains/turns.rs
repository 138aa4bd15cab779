//! A bot's turn in a chain: it is given the whole chain as one block (`context.rs`), takes a
//! turn in its own session in the chain's chat, and what it says is posted there — or the turn
//! goes back to the coordinator when it says nothing, fails, or runs out of time.
//!
//! The turn answers into the chat like a mention does (typing, the reply streaming in by
//! edits), with the chain as the reply's gate ([`ReplyGate`]): nothing shows once the turn is no
//! longer the bot's, and the finished reply is the chain's post only if the chain takes it
//! (else its streamed posts are deleted and the reply is only recorded).
//!
//! The time limit is `[chains] turn_timeout_seconds`, counted from the moment the turn is given:
//! waiting for the bot's session (it may be busy answering someone) counts too, because the
//! chain waits all the same. Past it the turn is handed back with a system note; the store makes
//! sure a post racing the timeout and the timeout itself cannot both win.

use std::sync::Mutex;

use async_trait::async_trait;
use baton_contract::ChatKey;
use futures::future::BoxFuture;
use serde_json::json;
use tokio::time::Instant;

use super::Chains;
use super::context::{self, Role};
use super::place::Place;
use crate::bot_id::BotId;
use crate::engine::Journal;
use crate::engine::{
    Attached, Caller, ChatReply, Engine, Heard, History, NotAdmitted, Recall, ReplyGate, Seat,
    SessionTurn, TurnEnd, TurnFailure, TurnPlan,
};
use crate::lanes::Lane;
use crate::store::{BATON, Chain, ChainClose, ChainState, EntryKind, Origin, Posted, turn_run_id};

/// A turn to take.
#[derive(Debug, Clone)]
pub(super) struct TurnJob {
    /// The chain, as it was when the turn was given (its `turn` is this turn's number).
    pub chain: Chain,
    /// Who takes it.
    pub bot: BotId,
    /// Participant (post once) or coordinator (move the turn).
    pub role: Role,
    /// What the bot is asked, or what happened while the coordinator waited.
    pub prompt: String,
}

/// Take `job` in the background (tracked, so a shutdown drains it).
pub(super) fn spawn(chains: &Chains, job: TurnJob) {
    chains.engine().tasks().spawn(run(chains.clone(), job));
}

/// Boxed rather than `async fn`: a turn posts, a post may give the next turn, and giving a turn
/// spawns this again. The named type breaks that cycle for the compiler.
fn run(chains: Chains, job: TurnJob) -> BoxFuture<'static, ()> {
    Box::pin(async move { take(&chains, job).await })
}

/// How a turn ended, for the chain.
enum Ended {
    /// The bot's reply is the chain's post.
    Posted(Box<Posted>),
    /// The bot said this (text, model), but the chain did not take it (why).
    NotPosted(String, String, NotAdmitted),
    /// The bot chose silence.
    Silent,
    /// Ran past the chain's turn timeout.
    TimedOut,
    /// Failed for another reason.
    Failed(String),
}

async fn take(chains: &Chains, job: TurnJob) {
    let engine = chains.engine();
    let deadline = Instant::now() + chains.turn_limit();
    let place = Place::of(&job.chain);
    let Some(account) = place.account_of(engine, &job.bot) else {
        let why = format!("{} has no account on {} any more", job.bot, place.platform);
        return finish(chains, &job, None, Ended::Failed(why)).await;
    };
    let session = place.session(account);
    let chain = &job.chain;
    let seat = Seat {
        session: &session,
        run_id: turn_run_id(&chain.id, chain.turn),
        lane: Lane::Nested,
    };
    let Ok(turn) = SessionTurn::enter_until(engine, seat, deadline).await else {
        return finish(chains, &job, None, Ended::TimedOut).await;
    };
    let log = engine
        .store()
        .chain_entries(&chain.id)
        .await
        .unwrap_or_else(|err| {
            tracing::error!(chain = %chain.id, %err, "could not read the chain; giving the turn without it");
            Vec::new()
        });
    let silent = &engine.config().gateway.silent_token;
    let text = context::turn_text(chain, &log, job.bot.as_str(), job.role, &job.prompt, silent);
    let plan = TurnPlan {
        bot: &account.bot,
        caller: Caller {
            trigger: chain.trigger.clone(),
            ..Caller::from_chat(&session)
        },
        history: History::NONE,
        heard: Heard {
            attached: Attached::NONE,
            speaker: BATON,
            name: BATON,
            origin: Origin::Gateway,
            text: &text,
            message_id: None,
            meta: json!({"name": BATON, "chain": chain.id, "turn": chain.turn, "role": job.role.as_str()}),
        },
        deadline: Some(deadline.into_std()),
        recall: Recall::MessageOnly,
        delivery: None,
    };
    let gate = TurnGate {
        engine,
        job: &job,
        quiet_in: place.chat_key(),
        taken: Mutex::new(None),
    };
    let reply = ChatReply {
        account,
        target: place.target(),
        answering: None,
        typing_at: place.anchor.as_ref(),
        gate: Some(&gate),
        asker: None,
    };
    // A failure to post the reply is recorded by the post; the chain has the post either way.
    let end = turn.answer(plan, reply).await.end;
    let ended = match end {
        TurnEnd::Reply { text, model, .. } => match gate.taken() {
            Ok(posted) => Ended::Posted(Box::new(posted)),
            Err(why) => Ended::NotPosted(text, model, why),
        },
        TurnEnd::Silent { .. } => Ended::Silent,
        TurnEnd::Failed(TurnFailure::TimedOut(_)) => Ended::TimedOut,
        TurnEnd::Failed(err) => Ended::Failed(err.to_string()),
    };
    finish(chains, &job, Some(turn.journal()), ended).await;
}

/// What the chain does with how the turn ended.
async fn finish(chains: &Chains, job: &TurnJob, journal: Option<&Journal>, ended: Ended) {
    let (chain, bot, turn) = (&job.chain, &job.bot, job.chain.turn);
    let seconds = chains.turn_limit().as_secs();
    match &ended {
        Ended::Posted(posted) => super::returned(chains, posted, bot).await,
        Ended::NotPosted(text, model, why) => {
            if let Some(journal) = journal {
                let meta = json!({"model": model, "posted": false, "chain": chain.id, "why": why.to_string()});
                journal.bot_did(EntryKind::Answer, text, meta).await;
            }
        }
        _ => {}
    }
    match job.role {
        Role::Participant => {
            let reason = match ended {
                Ended::Posted(_) | Ended::NotPosted(..) => return,
                Ended::Silent => format!("{bot} passed without posting"),
                Ended::TimedOut => format!("{bot}'s turn timed out after {seconds} s"),
                Ended::Failed(err) => format!("{bot}'s turn failed: {err}"),
            };
            super::hand_back(chains, chain, turn, reason).await;
        }
        Role::Coordinator => {
            // The coordinator was woken to move the turn. If the turn is still where it was,
            // nobody else will move it: the chain ends rather than hang open.
            let reason = match ended {
                Ended::TimedOut => format!("the coordinator {bot} did not act within {seconds} s"),
                Ended::Failed(err) => format!("the coordinator {bot}'s turn failed: {err}"),
                Ended::Posted(_) | Ended::NotPosted(..) | Ended::Silent => format!(
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
            if let Err(err) = super::close(chains.engine(), &chain.id, stall).await {
                tracing::error!(chain = %chain.id, %err, "could not close a stalled chain");
            }
        }
    }
}

/// The chain as the gate of a turn's reply: the reply is the bot's post only while the turn is
/// still its own, and only if it has not posted with `chain_message` in this turn already.
struct TurnGate<'a> {
    engine: &'a Engine,
    job: &'a TurnJob,
    quiet_in: ChatKey,
    /// What became of the finished reply, once it was asked.
    taken: Mutex<Option<Result<Posted, NotAdmitted>>>,
}

impl TurnGate<'_> {
    /// What became of the finished reply.
    fn taken(&self) -> Result<Posted, NotAdmitted> {
        self.taken
            .lock()
            .expect("gate poisoned")
            .take()
            .unwrap_or_else(|| Err(NotAdmitted("the reply was never offered".to_owned())))
    }

    /// Why the bot may not post in the chain now, if it may not.
    async fn why_not(&self) -> Option<NotAdmitted> {
        let (chain, bot) = (&self.job.chain, self.job.bot.as_str());
        let engine = self.engine;
        let why = match engine.store().chain(&chain.id).await.ok().flatten() {
            None => "the chain could not be read".to_owned(),
            Some(now) if now.state != ChainState::Open => format!("the chain is {}", now.state),
            Some(now) if !now.held_by(&self.job.bot) => {
                format!("the turn had moved on to {}", now.holder_name())
            }
            Some(_) if super::posted_in_turn(engine, &chain.id, bot, chain.turn).await => {
                "already posted with chain_message in this turn".to_owned()
            }
            Some(_) => return None,
        };
        Some(NotAdmitted(why))
    }
}

#[async_trait]
impl ReplyGate for TurnGate<'_> {
    fn quiet_in(&self) -> &ChatKey {
        &self.quiet_in
    }

    async fn open(&self) -> Result<(), NotAdmitted> {
        self.why_not().await.map_or(Ok(()), Err)
    }

    async fn admit(&self, text: &str) -> Result<(), NotAdmitted> {
        let taken = match self.why_not().await {
            Some(why) => Err(why),
            None => super::record(self.engine, &self.job.chain.id, &self.job.bot, text)
                .await
                .map_err(|refused| NotAdmitted(refused.to_string())),
        };
        let answer = taken.as_ref().map(|_| ()).map_err(Clone::clone);
        *self.taken.lock().expect("gate poisoned") = Some(taken);
        answer
    }
}
