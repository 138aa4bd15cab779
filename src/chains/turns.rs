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

#[cfg(test)]
mod tests {
    use baton_contract::Platform;

    use super::super::testing::{given, start_in_room, started, until_closed};
    use super::super::{Start, start};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};
    use crate::store::{ChainEntry, ChainEntryKind, NewChain, TranscriptQuery};
    use crate::timing::now_ms;

    fn bot(name: &str) -> BotId {
        name.parse().unwrap()
    }

    fn job(chain: Chain, who: &str, role: Role) -> TurnJob {
        TurnJob {
            chain,
            bot: bot(who),
            role,
            prompt: "your view?".into(),
        }
    }

    /// The entries of `kind` in the turn `chain` is at. Only that turn: a turn handed back
    /// wakes the coordinator in the background, and its turn may write while a test reads.
    async fn log(engine: &Engine, chain: &Chain, kind: ChainEntryKind) -> Vec<ChainEntry> {
        let log = engine.store().chain_entries(&chain.id).await.unwrap();
        log.into_iter()
            .filter(|e| e.kind == kind && e.turn == chain.turn)
            .collect()
    }

    fn stop(by: &str) -> ChainClose {
        ChainClose {
            state: ChainState::Stopped,
            by: by.into(),
            reason: "enough".into(),
            at_turn: None,
        }
    }

    /// The echo bot answers a chain turn with the chain's topic.
    #[tokio::test]
    async fn a_participants_reply_is_its_post_in_the_chat_and_the_turn_goes_back() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let (engine, chains) = (&gw.engine, &gw.chains);
        let chain = started(engine, Some("lead"), &["alpha"]).await;
        let chain = given(engine, &chain, "alpha").await;

        take(chains, job(chain.clone(), "alpha", Role::Participant)).await;
        let posts = log(engine, &chain, ChainEntryKind::Message).await;
        let posts: Vec<(&str, &str, i64)> = posts
            .iter()
            .map(|e| (e.sender.as_str(), e.content.as_str(), e.turn))
            .collect();
        assert_eq!(posts, [("alpha", "plan", chain.turn)]);
        let room = gw.hub.messages("room", None).await.unwrap();
        assert!(
            room.iter().any(|m| m.author == "alpha" && m.text == "plan"),
            "{room:?}"
        );
        let notes = log(engine, &chain, ChainEntryKind::System).await;
        assert!(notes.is_empty(), "a post needs no note: {notes:?}");
        assert_woken_coordinator_stalled(engine, &chain).await;
    }

    /// The turn went back: the coordinator was woken and, an echo bot that moves nothing,
    /// ended its turn and so the chain.
    async fn assert_woken_coordinator_stalled(engine: &Engine, chain: &Chain) {
        let closed = until_closed(engine, &chain.id).await;
        assert_eq!(closed.state, ChainState::Stalled, "{closed:?}");
        assert_eq!(closed.turn, chain.turn + 1, "{closed:?}");
    }

    #[tokio::test]
    async fn a_participant_that_passes_hands_the_turn_back_with_a_note() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let silent = engine.config().gateway.silent_token.clone();
        let quiet = start(
            engine,
            Start {
                name: silent,
                ..start_in_room(Some("lead"), &["alpha"])
            },
        )
        .await
        .unwrap();
        let chain = given(engine, &quiet, "alpha").await;

        take(&gw.chains, job(chain.clone(), "alpha", Role::Participant)).await;
        assert_eq!(log(engine, &chain, ChainEntryKind::Message).await, []);
        let notes = log(engine, &chain, ChainEntryKind::System).await;
        let notes: Vec<&str> = notes.iter().map(|e| e.content.as_str()).collect();
        assert_eq!(notes, ["alpha passed without posting"]);
        assert_woken_coordinator_stalled(engine, &chain).await;
    }

    /// Waiting for the bot's session counts toward the turn's limit: the chain waits all the
    /// same.
    #[tokio::test]
    async fn a_turn_that_cannot_start_in_time_times_out_and_goes_back() {
        let config = echo_config(&["lead", "alpha"], "\n[chains]\nturn_timeout_seconds = 1\n");
        let gw = parts(&config).await;
        let engine = &gw.engine;
        let chain = started(engine, Some("lead"), &["alpha"]).await;
        let chain = given(engine, &chain, "alpha").await;
        let place = Place::of(&chain);
        let alpha = place.account_of(engine, &bot("alpha")).unwrap();
        let _busy = engine
            .lanes()
            .enter(Lane::Main, &place.session(alpha))
            .await;

        take(&gw.chains, job(chain.clone(), "alpha", Role::Participant)).await;
        let notes = log(engine, &chain, ChainEntryKind::System).await;
        let notes: Vec<&str> = notes.iter().map(|e| e.content.as_str()).collect();
        assert_eq!(notes, ["alpha's turn timed out after 1 s"]);
    }

    /// A chain whose platform a bot has no account on any more: the participant's turn fails
    /// and goes back; the coordinator's fails too, and the chain ends rather than hang open.
    #[tokio::test]
    async fn failed_turns_go_back_and_a_coordinator_that_cannot_act_stalls_the_chain() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let elsewhere = Place {
            platform: Platform::Slack,
            ..super::super::testing::room()
        };
        let new = NewChain {
            name: "plan".into(),
            coordinator: Some(bot("lead")),
            participants: vec![bot("alpha")],
            origin: elsewhere.origin(),
            started_by: "ann".into(),
            trigger: None,
        };
        let chain = engine.store().create_chain(new, now_ms()).await.unwrap();
        let chain = given(engine, &chain, "alpha").await;

        take(&gw.chains, job(chain.clone(), "alpha", Role::Participant)).await;
        let notes = log(engine, &chain, ChainEntryKind::System).await;
        assert_eq!(
            notes.first().map(|e| e.content.as_str()),
            Some("alpha's turn failed: alpha has no account on slack any more")
        );
        let closed = until_closed(engine, &chain.id).await;
        assert_eq!(closed.state, ChainState::Stalled);
        assert_eq!(
            closed.closed_reason.as_deref(),
            Some("the coordinator lead's turn failed: lead has no account on slack any more")
        );
    }

    #[tokio::test]
    async fn a_coordinator_that_ends_its_turn_without_moving_it_stalls_the_chain() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let chain = started(engine, Some("lead"), &["alpha"]).await;

        take(&gw.chains, job(chain.clone(), "lead", Role::Coordinator)).await;
        let now = engine.store().chain(&chain.id).await.unwrap().unwrap();
        assert_eq!(now.state, ChainState::Stalled);
        assert_eq!(
            now.closed_reason.as_deref(),
            Some(
                "the coordinator lead ended its turn without handing the turn on or closing the \
                 chain"
            )
        );
    }

    /// The bot's answer is kept in its transcript, marked as not posted and why, and the chat
    /// sees nothing of it.
    #[tokio::test]
    async fn a_reply_the_chain_no_longer_takes_is_recorded_but_not_posted() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let chain = started(engine, Some("lead"), &["alpha"]).await;
        let chain = given(engine, &chain, "alpha").await;
        engine
            .store()
            .chain_close(&chain.id, stop("ann"), now_ms())
            .await
            .unwrap();

        take(&gw.chains, job(chain.clone(), "alpha", Role::Participant)).await;
        let room = gw.hub.messages("room", None).await.unwrap();
        assert!(room.iter().all(|m| m.author != "alpha"), "{room:?}");
        let place = Place::of(&chain);
        let alpha = place.account_of(engine, &bot("alpha")).unwrap();
        let query = TranscriptQuery::session(place.session(alpha));
        let transcript = engine.store().transcript(query).await.unwrap();
        let answer = transcript
            .iter()
            .find(|e| e.kind == EntryKind::Answer)
            .expect("the answer is recorded");
        assert_eq!(answer.text, "plan");
        assert_eq!(answer.meta["posted"], false, "{answer:?}");
        assert_eq!(answer.meta["why"], "the chain is stopped", "{answer:?}");
    }

    /// The gate takes a reply only while the turn is the bot's, and not after the bot posted
    /// in this turn with `chain_message`.
    #[tokio::test]
    async fn the_gate_takes_a_reply_only_on_the_bots_own_turn_and_once() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let chain = started(engine, Some("lead"), &["alpha"]).await;
        let gate = |job| TurnGate {
            engine,
            job,
            quiet_in: Place::of(&chain).chat_key(),
            taken: Mutex::new(None),
        };
        let why = |refused: Result<(), NotAdmitted>| refused.unwrap_err().to_string();

        let leads = job(chain.clone(), "lead", Role::Coordinator);
        let lead = gate(&leads);
        assert_eq!(
            lead.taken().unwrap_err().to_string(),
            "the reply was never offered"
        );
        lead.open().await.unwrap();
        engine
            .store()
            .chain_post(&chain.id, &bot("lead"), "first", now_ms())
            .await
            .unwrap();
        let twice = why(lead.open().await);
        assert_eq!(twice, "already posted with chain_message in this turn");

        let alphas = job(
            given(engine, &chain, "alpha").await,
            "alpha",
            Role::Participant,
        );
        let alpha = gate(&alphas);
        alpha.admit("mine").await.unwrap();
        assert!(alpha.taken().unwrap().returned);
        assert_eq!(why(alpha.open().await), "the turn had moved on to lead");
        assert_eq!(
            why(alpha.admit("again").await),
            "the turn had moved on to lead"
        );
        assert!(alpha.taken().is_err());

        engine
            .store()
            .chain_close(&chain.id, stop("ann"), now_ms())
            .await
            .unwrap();
        assert_eq!(why(lead.open().await), "the chain is stopped");
    }
}
