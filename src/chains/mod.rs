//! Chains: ordered turn-taking among bots in one chat. A coordinator hands the
//! floor to one bot at a time; that bot reads everything said before it, posts once, and the
//! turn goes back to the coordinator.
//!
//! ```text
//!  start: chain_create, /baton chain start ─▶ the coordinator holds the turn
//!  coordinator: chain_pass, chain_add ─▶ handoff ─▶ the participant's turn, given the whole
//!                                                   chain as one block (context.rs, turns.rs)
//!  participant: chain_message, or its reply ─▶ posted in the chat under its own account
//!                                              (post.rs), then the turn goes back
//!  silence, a failed turn, [chains] turn_timeout_seconds ─▶ a system note; the turn goes back
//!  back with the coordinator ─▶ a bot: its turn, with the same block
//!                           └─▶ baton: the next participant in order, or close (round_robin.rs)
//!  closed by: chain_close, a human's /baton chain stop, max_rounds, a coordinator that lets its
//!             turn pass without moving it
//! ```
//!
//! Turn-taking is enforced where posts are made, not by asking the bots nicely: every move of
//! the turn is checked and made in one store job ([`crate::store::Store::chain_post`]), so a
//! bot that is not the holder is refused whatever its model believes, and a late post after a
//! timeout (or a late timeout after a post) changes nothing. Posts never wake other bots
//! through the chat either: a chain gives turns, the chat does not (see `post.rs`). Chains a
//! restart interrupted are picked up at start (`recover.rs`).

mod context;
mod handle;
mod place;
mod post;
mod recover;
mod round_robin;
mod turns;

#[cfg(test)]
mod testing;

pub(crate) use handle::Chains;
pub(crate) use place::Place;
pub(crate) use recover::{recover, serve};

use self::context::Role;
use self::turns::TurnJob;
use crate::bot_id::{BotId, names};
use crate::engine::Engine;
use crate::events::Event;
use crate::store::{
    BATON, Chain, ChainClose, ChainEntryKind, ChainError, ChainState, Handed, Handoff, NewChain,
    Posted, turn_runs,
};
use crate::timing::now_ms;

/// A chain to start.
#[derive(Debug, Clone)]
pub(crate) struct Start {
    /// What it is about.
    pub name: String,
    /// The coordinating bot; `None` for baton's round-robin.
    pub coordinator: Option<String>,
    /// Participants, in order.
    pub participants: Vec<String>,
    /// Where it posts.
    pub place: Place,
    /// Who started it (a bot id, or a human's id).
    pub started_by: String,
    /// The trigger of the turn that started it, which its turns are charged to; `None` when an
    /// admin's command started it.
    pub trigger: Option<String>,
    /// How the chat learns it started.
    pub opening: Opening,
}

/// How the people in the chat learn that a chain started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opening {
    /// baton posts an announcement, which the chain's posts then answer if it has no anchor.
    Announce,
    /// The command that started it is answered in the chat, which says it all.
    CommandAnswer,
}

/// A handoff asked for by the coordinator (`chain_pass`, `chain_add`) or by baton.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pass<'a> {
    /// The chain.
    pub chain: &'a str,
    /// Who hands the turn: must be the coordinator.
    pub by: &'a str,
    /// Who gets it.
    pub to: &'a str,
    /// What it is asked.
    pub prompt: &'a str,
    /// Whether `to` joins the chain with this handoff (`chain_add`).
    pub joins: bool,
}

/// Why a chain operation was not done. Each message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChainFailure {
    /// The store said no (not the holder, closed, unknown chain) or failed.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// Only the coordinator may do this.
    #[error("only the coordinator of chain {id} ({coordinator}) can {what}")]
    NotCoordinator {
        /// The chain.
        id: String,
        /// Its coordinator.
        coordinator: String,
        /// What was tried.
        what: &'static str,
    },
    /// The request itself is wrong (unknown bot, empty text, ...).
    #[error("{0}")]
    Invalid(String),
}

impl ChainFailure {
    /// A short reason code for refusals that are the rules working (tool results, metrics);
    /// `None` for mistakes and failures.
    pub(crate) fn refusal(&self) -> Option<&'static str> {
        match self {
            ChainFailure::Chain(ChainError::NotHolder { .. }) => Some("not-holder"),
            ChainFailure::Chain(ChainError::TurnTaken { .. }) => Some("turn-taken"),
            ChainFailure::Chain(ChainError::Closed { .. }) => Some("closed"),
            ChainFailure::NotCoordinator { .. } => Some("not-coordinator"),
            _ => None,
        }
    }
}

/// Start a chain: check everyone can speak in its chat, record it (the coordinator holds the
/// turn) and tell the chat. Nobody is given a turn yet: see [`kick_off`].
pub(crate) async fn start(engine: &Engine, start: Start) -> Result<Chain, ChainFailure> {
    let place = &start.place;
    let coordinator = match &start.coordinator {
        Some(name) => {
            let coordinator = place
                .speaker(engine, name)
                .map_err(|why| ChainFailure::Invalid(format!("the coordinator: {why}")))?;
            if start.participants.contains(name) {
                return Err(ChainFailure::Invalid(format!(
                    "`{coordinator}` coordinates the chain and cannot also be a participant; \
                     leave it out of the participants"
                )));
            }
            Some(coordinator)
        }
        None => None,
    };
    let mut participants: Vec<BotId> = Vec::with_capacity(start.participants.len());
    for name in &start.participants {
        let bot = place.speaker(engine, name).map_err(ChainFailure::Invalid)?;
        if !participants.contains(&bot) {
            participants.push(bot);
        }
    }
    let new = NewChain {
        name: start.name.trim().to_owned(),
        coordinator,
        participants,
        origin: place.origin(),
        started_by: start.started_by.clone(),
        trigger: start.trigger.clone(),
    };
    let chain = engine
        .store()
        .create_chain(new, now_ms())
        .await
        .map_err(ChainError::from)?;
    tracing::info!(chain = %chain.id, coordinator = chain.coordinator_name(), "chain started");
    moved(engine, &chain, "created", None);
    if start.opening == Opening::Announce {
        return Ok(announce(engine, chain, place).await);
    }
    Ok(chain)
}

/// Set a started chain going: its coordinating bot takes a turn with `prompt`, or baton gives
/// the first participant the turn.
pub(crate) async fn kick_off(chains: &Chains, chain: Chain, prompt: String) {
    coordinator_move(chains, chain, prompt).await;
}

/// Give the turn to `pass.to` (adding it to the chain first when it `joins`). Its turn starts
/// in the background; the result is the chain after the move.
pub(crate) async fn hand(chains: &Chains, pass: Pass<'_>) -> Result<Handed, ChainFailure> {
    let engine = chains.engine();
    let chain = load(engine, pass.chain).await?;
    if pass.by != chain.coordinator_name() {
        return Err(ChainFailure::NotCoordinator {
            coordinator: chain.coordinator_name().to_owned(),
            id: chain.id,
            what: "hand the turn to a bot",
        });
    }
    let place = Place::of(&chain);
    let to = place
        .speaker(engine, pass.to)
        .map_err(ChainFailure::Invalid)?;
    if chain.coordinator.as_ref() == Some(&to) {
        return Err(ChainFailure::Invalid(
            "you coordinate this chain and hold the turn already; post with chain_message, \
             or hand the turn to a participant"
                .to_owned(),
        ));
    }
    if !pass.joins && !chain.participants.contains(&to) {
        return Err(ChainFailure::Invalid(format!(
            "`{to}` is not a participant of chain {} (participants: {}); bring it in with \
             chain_add",
            chain.id,
            names(&chain.participants)
        )));
    }
    let handoff = Handoff {
        chain: chain.id.clone(),
        by: pass.by.to_owned(),
        to: to.clone(),
        prompt: pass.prompt.trim().to_owned(),
        add: pass.joins,
        max_rounds: engine.config().chains.max_rounds,
    };
    let handed = engine.store().chain_hand(handoff, now_ms()).await?;
    match &handed {
        Handed::Given(chain) => {
            moved(engine, chain, "turn_given", Some(pass.to));
            turns::spawn(
                chains,
                TurnJob {
                    chain: chain.clone(),
                    bot: to,
                    role: Role::Participant,
                    prompt: pass.prompt.to_owned(),
                },
            );
        }
        Handed::Capped(chain) => {
            moved(engine, chain, "closed", None);
            closed(engine, chain).await;
        }
    }
    Ok(handed)
}

/// Post `content` as `sender`, who must hold the turn: recorded, shown in the chat under the
/// sender's own account, and the turn goes back to the coordinator.
pub(crate) async fn post(
    chains: &Chains,
    chain: &str,
    sender: &BotId,
    content: &str,
) -> Result<Posted, ChainFailure> {
    let engine = chains.engine();
    let posted = record(engine, chain, sender, content).await?;
    let chain = &posted.chain;
    let place = Place::of(chain);
    match place.account_of(engine, sender) {
        Some(account) => {
            let run_id = format!("chain:{}:m{}", chain.id, posted.entry);
            post::say(engine, &place, account, run_id, content).await;
        }
        None => tracing::error!(chain = %chain.id, %sender, "the poster has no account here"),
    }
    returned(chains, &posted, sender).await;
    Ok(posted)
}

/// Record `content` as `sender`'s post, who must hold the turn; showing it in the chat is the
/// caller's (a tool's post is said at once, a turn's reply has been streaming in).
async fn record(
    engine: &Engine,
    chain: &str,
    sender: &BotId,
    content: &str,
) -> Result<Posted, ChainFailure> {
    let content = content.trim();
    if content.is_empty() {
        return Err(ChainFailure::Invalid(
            "`content` is empty; write what you want to say in the chain".to_owned(),
        ));
    }
    let posted = match engine
        .store()
        .chain_post(chain, sender, content, now_ms())
        .await
    {
        Ok(posted) => posted,
        Err(err) => {
            let err = ChainFailure::from(err);
            if let Some(reason) = err.refusal() {
                let place = engine.store().chain(chain).await.ok().flatten();
                let chat = place.map(|c| {
                    let chat = c.origin.chat.as_str().into();
                    baton_contract::ChatKey::new(c.origin.platform, &chat, None)
                });
                engine.refused("chain", reason, chat, sender);
                tracing::info!(chain, %sender, reason, "chain post refused");
            }
            return Err(err);
        }
    };
    moved(engine, &posted.chain, "posted", Some(sender.as_str()));
    Ok(posted)
}

/// After `sender`'s post: a turn that went back to the coordinator is moved on from there.
async fn returned(chains: &Chains, posted: &Posted, sender: &BotId) {
    if posted.returned {
        coordinator_move(chains, posted.chain.clone(), format!("{sender} posted.")).await;
    }
}

/// Close an open chain; `Ok(None)` if it was closed already. When a human or the coordinator
/// closes it, its turns still running are stopped like `/baton stop` stops them (an agent's
/// process group is ended, nothing of them is posted), save the closing coordinator's own. baton
/// closes a chain itself only as a turn of it ends or posts (round-robin done, a stall): that
/// turn is the chain's last and ends on its own. A chain a human stopped is not announced again
/// (their command's answer says it); any other ending is told in the chat.
pub(crate) async fn close(
    engine: &Engine,
    chain: &str,
    close: ChainClose,
) -> Result<Option<Chain>, ChainFailure> {
    let (state, by) = (close.state, close.by.clone());
    let closed_chain = engine.store().chain_close(chain, close, now_ms()).await?;
    if let Some(chain) = &closed_chain {
        let stopped = if by == BATON {
            0
        } else {
            engine.running().stop_runs(&turn_runs(&chain.id), &by)
        };
        tracing::info!(chain = %chain.id, state = %chain.state, stopped, "chain closed");
        moved(engine, chain, "closed", None);
        if state != ChainState::Stopped {
            closed(engine, chain).await;
        }
    }
    Ok(closed_chain)
}

/// Stop every open chain started in `platform`'s chat `chat` (a human's `/baton chain stop`):
/// their running turns are stopped, nothing new starts and nothing more is posted.
pub(crate) async fn stop_in_chat(
    engine: &Engine,
    platform: &str,
    chat: &str,
    by: &str,
) -> Result<Vec<Chain>, ChainFailure> {
    let query = crate::store::ChainQuery {
        open_in: Some((platform.to_owned(), chat.to_owned())),
        limit: None,
    };
    let open = engine
        .store()
        .chains(query)
        .await
        .map_err(ChainError::from)?;
    let mut stopped = Vec::with_capacity(open.len());
    for chain in open {
        let stop = stop_by(by);
        if let Some(chain) = close(engine, &chain.id, stop).await? {
            stopped.push(chain);
        }
    }
    Ok(stopped)
}

/// How a human stops a chain.
pub(crate) fn stop_by(by: &str) -> ChainClose {
    ChainClose {
        state: ChainState::Stopped,
        by: by.to_owned(),
        reason: "stopped with /baton chain stop".to_owned(),
        at_turn: None,
    }
}

/// The chain made a move (`created`, `turn_given`, `posted`, `returned`, `closed`), concerning
/// `bot` when one is named: announced on the event stream.
fn moved(engine: &Engine, chain: &Chain, step: &str, bot: Option<&str>) {
    engine.events().emit(Event::Chain {
        chain: chain.id.clone(),
        step: step.to_owned(),
        bot: bot.map(str::to_owned),
        holder: chain.holder_name().to_owned(),
        state: chain.state.to_string(),
    });
}

/// Whether `bot` posted in `chain` during `turn` (with `chain_message`, inside its turn).
async fn posted_in_turn(engine: &Engine, chain: &str, bot: &str, turn: i64) -> bool {
    engine
        .store()
        .chain_entries(chain)
        .await
        .unwrap_or_default()
        .iter()
        .any(|e| e.kind == ChainEntryKind::Message && e.turn == turn && e.sender == bot)
}

/// A participant's turn ended without a post: the turn goes back to the coordinator with a
/// system note, unless it moved on already (then nothing happens).
async fn hand_back(chains: &Chains, chain: &Chain, turn: i64, reason: String) {
    let engine = chains.engine();
    match engine
        .store()
        .chain_return(&chain.id, turn, &reason, now_ms())
        .await
    {
        Ok(Some(back)) => {
            moved(engine, &back, "returned", None);
            let run_id = format!("chain:{}:r{turn}", back.id);
            post::baton_says(engine, &Place::of(&back), run_id, &reason).await;
            coordinator_move(chains, back, reason).await;
        }
        Ok(None) => {}
        Err(err) => tracing::error!(chain = %chain.id, %err, "could not hand the turn back"),
    }
}

/// The turn is with the coordinator: wake the coordinating bot, or let baton move it.
async fn coordinator_move(chains: &Chains, chain: Chain, news: String) {
    if chain.state != ChainState::Open {
        return;
    }
    match chain.coordinator.clone() {
        None => round_robin::next(chains, chain).await,
        Some(bot) => turns::spawn(
            chains,
            TurnJob {
                chain,
                bot,
                role: Role::Coordinator,
                prompt: news,
            },
        ),
    }
}

/// Tell the chat a chain started; its announcement becomes the anchor when it has none, so the
/// posts that follow sit under it.
async fn announce(engine: &Engine, chain: Chain, place: &Place) -> Chain {
    let participants = if chain.participants.is_empty() {
        "none yet".to_owned()
    } else {
        names(&chain.participants)
    };
    let text = format!(
        "Chain {} \"{}\" started by {}: {} coordinates; participants: {participants}. One bot \
         speaks at a time, here. `/baton chain stop` ends it.",
        chain.id,
        chain.name,
        chain.started_by,
        chain.coordinator_name()
    );
    let run_id = format!("chain:{}:open", chain.id);
    let posted = post::baton_says(engine, place, run_id, &text).await;
    let (Some(anchor), None, None) = (posted, &place.anchor, &place.thread) else {
        return chain;
    };
    if let Err(err) = engine
        .store()
        .chain_anchor(&chain.id, anchor.as_str())
        .await
    {
        tracing::error!(chain = %chain.id, %err, "could not remember the announcement");
        return chain;
    }
    engine
        .store()
        .chain(&chain.id)
        .await
        .ok()
        .flatten()
        .unwrap_or(chain)
}

/// Tell the chat how a chain ended.
async fn closed(engine: &Engine, chain: &Chain) {
    let place = Place::of(chain);
    let text = format!(
        "Chain {} \"{}\" {}: {}",
        chain.id,
        chain.name,
        chain.state,
        chain.closed_reason.as_deref().unwrap_or("closed")
    );
    post::baton_says(engine, &place, format!("chain:{}:close", chain.id), &text).await;
}

async fn load(engine: &Engine, id: &str) -> Result<Chain, ChainFailure> {
    match engine.store().chain(id).await.map_err(ChainError::from)? {
        Some(chain) => Ok(chain),
        None => Err(ChainError::Unknown(id.trim().to_owned()).into()),
    }
}

/// Whether `bot` coordinates `chain`.
pub(crate) fn is_coordinator(chain: &Chain, bot: &BotId) -> bool {
    chain.coordinator.as_ref() == Some(bot)
}

#[cfg(test)]
mod tests {
    use super::testing::{start_in_room, until_closed};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    fn pass<'a>(chain: &'a str, by: &'a str, to: &'a str) -> Pass<'a> {
        Pass {
            chain,
            by,
            to,
            prompt: "your view?",
            joins: false,
        }
    }

    /// The rules of moving the turn, enforced where the move is made: only the holder posts,
    /// only the coordinator hands the turn on, and only to a participant.
    #[tokio::test]
    async fn only_the_holder_posts_and_only_the_coordinator_moves_the_turn() {
        let gw = parts(&echo_config(&["lead", "alpha", "beta", "gamma"], "")).await;
        let s = &gw.engine;
        let chain = start(s, start_in_room(Some("lead"), &["alpha", "beta"]))
            .await
            .unwrap();
        assert_eq!(chain.holder.bot().map(BotId::as_str), Some("lead"));

        let err = post(&gw.chains, &chain.id, &"alpha".parse().unwrap(), "me first")
            .await
            .unwrap_err();
        assert_eq!(err.refusal(), Some("not-holder"), "{err}");
        let err = hand(&gw.chains, pass(&chain.id, "alpha", "beta"))
            .await
            .unwrap_err();
        assert_eq!(err.refusal(), Some("not-coordinator"), "{err}");
        let err = hand(&gw.chains, pass(&chain.id, "lead", "gamma"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("chain_add"), "{err}");

        let Handed::Given(moved) = hand(&gw.chains, pass(&chain.id, "lead", "alpha"))
            .await
            .unwrap()
        else {
            panic!("the first handoff is within the rounds");
        };
        assert_eq!(
            (moved.holder.bot().map(BotId::as_str), moved.turn),
            (Some("alpha"), chain.turn + 1)
        );
    }

    /// Without a coordinator baton gives each participant the turn in order; each one's reply
    /// is its post, and the chain closes after `[chains] rounds`.
    #[tokio::test]
    async fn a_round_robin_gives_each_participant_the_turn_in_order_then_closes() {
        let gw = parts(&echo_config(&["lead", "alpha", "beta"], "")).await;
        let s = &gw.engine;
        let chain = start(s, start_in_room(None, &["alpha", "beta"]))
            .await
            .unwrap();
        kick_off(&gw.chains, chain.clone(), "go".into()).await;
        let closed = until_closed(s, &chain.id).await;
        assert_eq!(closed.state, ChainState::Completed, "{closed:?}");
        let posters: Vec<String> = s
            .store()
            .chain_entries(&chain.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == ChainEntryKind::Message)
            .map(|e| e.sender)
            .collect();
        let rounds = usize::try_from(s.config().chains.rounds).unwrap();
        let expected: Vec<&str> = ["alpha", "beta"].repeat(rounds);
        assert_eq!(posters, expected);
    }
}
