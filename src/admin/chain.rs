//! `/baton chain start|status|close` (alias `stop`): chains steered by the people in the chat.
//!
//! `start` runs a chain in this chat with the admin as its human side: with `[chains]
//! coordinator` set, that bot coordinates with the chain tools; without it, baton gives each
//! participant the turn in the order named, `[chains] rounds` times. `stop` is also the
//! emergency brake: any human in the chat a chain posts in may pull it ([`may_stop`]), not only
//! admins, because stopping bots is never the dangerous direction.

use std::fmt::Write as _;

use baton_contract::InboundKind;

use super::{AdminCommand, AdminError, AfterAnswer, Answer, Invocation, resolve_bot};
use crate::bot_id::{BotId, names};
use crate::chains::{self, Opening, Place, Start};
use crate::engine::Engine;
use crate::store::{Chain, ChainEntry, ChainQuery, ChainState};

/// How many log entries `chain status ID` shows.
const STATUS_TAIL: usize = 10;

/// Start a chain of `participants` on `topic` in this chat.
pub(super) async fn start(
    engine: &Engine,
    inbound: &Invocation<'_>,
    participants: &[String],
    topic: &str,
) -> Result<Answer, AdminError> {
    let event = &inbound.event;
    // `baton check` made sure a configured coordinator may use chain_pass and chain_close.
    let coordinator = engine.config().chains.coordinator.clone();
    let mut bots = Vec::with_capacity(participants.len());
    for name in participants {
        bots.push(resolve_bot(engine, inbound, name)?.to_string());
    }
    // A typed command is answered in the chat, under itself: that answer is the announcement,
    // and the chain's posts follow it. A native command is answered privately, so baton
    // announces the chain in the channel and the posts follow the announcement.
    let (anchor, opening) = match event.kind {
        InboundKind::Message => (Some(event.message_id.clone()), Opening::CommandAnswer),
        InboundKind::Command { .. } => (None, Opening::Announce),
    };
    let voice = coordinator
        .as_deref()
        .and_then(|c| c.parse().ok())
        .and_then(|c: BotId| engine.roster().account_of_bot(event.platform, &c))
        .map_or_else(|| inbound.account.id.clone(), |a| a.id.clone());
    let start = Start {
        name: topic.to_owned(),
        coordinator,
        participants: bots,
        place: Place {
            platform: event.platform,
            chat: event.chat.clone(),
            thread: event.thread.clone(),
            anchor,
            account: voice,
        },
        started_by: event.sender.id.to_string(),
        trigger: None,
        opening,
    };
    let chain = chains::start(engine, start)
        .await
        .map_err(AdminError::ChainNotStarted)?;
    let who = &inbound.speaker_name;
    let list = names(&chain.participants);
    let prompt = format!(
        "{who} started this chain: \"{topic}\". Participants, in the order named: {list}. Give \
         them the turn one at a time."
    );
    let text = format!(
        "Started chain {} \"{topic}\": {} coordinates; participants {list}. One bot speaks at a \
         time, here. `/baton chain stop` ends it.",
        chain.id,
        chain.coordinator_name()
    );
    Ok(Answer {
        text,
        then: Some(AfterAnswer::KickOff(chain, prompt)),
    })
}

/// One chain's state and its latest entries, or the open chains of this chat.
pub(super) async fn status(
    engine: &Engine,
    inbound: &Invocation<'_>,
    id: Option<&str>,
) -> Result<String, AdminError> {
    let store = engine.store();
    let Some(id) = id else {
        let open = store.chains(open_here(inbound)).await?;
        if open.is_empty() {
            return Ok(
                "No open chain in this chat. `/baton chain status ID` shows any chain; \
                       `baton chains` lists them all."
                    .to_owned(),
            );
        }
        let lines: Vec<String> = open.iter().map(summary).collect();
        return Ok(format!("Open chains here:\n{}", lines.join("\n")));
    };
    let Some(chain) = store.chain(id).await? else {
        return Err(AdminError::NoChain(id.to_owned()));
    };
    let log = store.chain_entries(&chain.id).await?;
    let mut out = summary(&chain);
    let skip = log.len().saturating_sub(STATUS_TAIL);
    for entry in &log[skip..] {
        let _ = write!(out, "\n  {}", entry_line(entry));
    }
    Ok(out)
}

/// Stop one chain, or every open chain of this chat.
pub(super) async fn close(
    engine: &Engine,
    inbound: &Invocation<'_>,
    id: Option<&str>,
) -> Result<String, AdminError> {
    let by = inbound.event.sender.id.to_string();
    let Some(id) = id else {
        let event = &inbound.event;
        let stopped =
            chains::stop_in_chat(engine, event.platform.as_str(), event.chat.as_str(), &by)
                .await
                .map_err(AdminError::Chain)?;
        if stopped.is_empty() {
            return Err(AdminError::NothingToStop);
        }
        let ids: Vec<&str> = stopped.iter().map(|c| c.id.as_str()).collect();
        return Ok(format!(
            "Stopped chain {}. Its running turns are stopped; nothing more is posted.",
            ids.join(", ")
        ));
    };
    match chains::close(engine, id, chains::stop_by(&by)).await {
        Ok(Some(chain)) => Ok(format!(
            "Stopped chain {}. Its running turns are stopped; nothing more is posted.",
            chain.id
        )),
        Ok(None) => {
            let state = engine
                .store()
                .chain(id)
                .await
                .ok()
                .flatten()
                .map(|c| c.state);
            Err(AdminError::ChainClosed {
                id: id.to_owned(),
                state: state.map_or("closed", ChainState::as_str).to_owned(),
            })
        }
        Err(err) => Err(AdminError::Chain(err)),
    }
}

/// Whether a human who is not an admin may run `command` here: only `chain stop`, and only for
/// chains that post in this chat. A person reading a chain can always stop it.
pub(crate) async fn may_stop(
    engine: &Engine,
    inbound: &Invocation<'_>,
    command: &AdminCommand,
) -> bool {
    let AdminCommand::ChainClose(id) = command else {
        return false;
    };
    let open = engine
        .store()
        .chains(open_here(inbound))
        .await
        .unwrap_or_default();
    match id {
        None => !open.is_empty(),
        Some(id) => open.iter().any(|c| c.id.eq_ignore_ascii_case(id.trim())),
    }
}

fn open_here(inbound: &Invocation<'_>) -> ChainQuery {
    ChainQuery {
        open_in: Some((
            inbound.event.platform.to_string(),
            inbound.event.chat.to_string(),
        )),
        limit: None,
    }
}

fn summary(chain: &Chain) -> String {
    let mut line = format!(
        "{} \"{}\" — {}, turn {} (round {}): {} holds the turn; coordinator {}; participants {}",
        chain.id,
        chain.name,
        chain.state,
        chain.turn,
        chain.round,
        chain.holder_name(),
        chain.coordinator_name(),
        names(&chain.participants)
    );
    if let Some(reason) = &chain.closed_reason {
        let _ = write!(line, "; ended: {reason}");
    }
    line
}

fn entry_line(entry: &ChainEntry) -> String {
    let to = entry
        .recipient
        .as_deref()
        .map(|r| format!(" → {r}"))
        .unwrap_or_default();
    format!(
        "turn {} {} {}{to}: {}",
        entry.turn, entry.kind, entry.sender, entry.content
    )
}

#[cfg(test)]
mod tests {
    use baton_contract::{
        AccountId, ChatId, ChatKind, InboundEvent, MessageId, Platform, Sender, UserId,
    };

    use crate::chains::{self, Opening, Place, Start};
    use crate::dispatcher::Handled;
    use crate::gateway::testing::{echo_config, parts};
    use crate::store::ChainState;

    /// `/baton chain stop` from `ann`, who is no admin, in `chat` (message `n`).
    fn stop_from_ann(n: u32, chat: &str) -> InboundEvent {
        let sender = Sender {
            id: UserId::from("ann"),
            name: "ann".to_owned(),
            is_bot: false,
            is_self: false,
        };
        InboundEvent::text_message(
            Platform::Local,
            AccountId::from("lead"),
            ChatId::from(chat),
            ChatKind::Group,
            sender,
            MessageId::from(format!("m{n}")),
            "/baton chain stop",
        )
    }

    /// A chain of `alpha` and `beta`, coordinated by `lead`, posting in `chat`.
    fn chain_in(chat: &str) -> Start {
        Start {
            name: "plan".into(),
            coordinator: Some("lead".into()),
            participants: vec!["alpha".into(), "beta".into()],
            place: Place {
                platform: Platform::Local,
                chat: ChatId::from(chat),
                thread: None,
                anchor: None,
                account: AccountId::from("lead"),
            },
            started_by: "root".into(),
            trigger: None,
            opening: Opening::CommandAnswer,
        }
    }

    /// Anyone reading a chain may stop it, admin or not; in a chat where no chain posts, a
    /// person who is no admin is refused like for any other command.
    #[tokio::test]
    async fn anyone_may_stop_the_chains_posting_where_they_are() {
        let gw = parts(&echo_config(&["lead", "alpha", "beta"], "")).await;
        let answer = |handled: Handled| match handled {
            Handled::Admin(answer) => answer,
            other => panic!("not answered as a command: {other:?}"),
        };
        let elsewhere = chains::start(&gw.engine, chain_in("elsewhere"))
            .await
            .unwrap();
        let refused = answer(gw.dispatcher.handle(stop_from_ann(1, "room")).await);
        assert!(refused.contains("Only baton admins"), "{refused}");

        let here = chains::start(&gw.engine, chain_in("room")).await.unwrap();
        let stopped = answer(gw.dispatcher.handle(stop_from_ann(2, "room")).await);
        assert!(
            stopped.contains(&format!("Stopped chain {}", here.id)),
            "{stopped}"
        );
        let store = gw.engine.store();
        let here = store.chain(&here.id).await.unwrap().unwrap();
        assert_eq!(here.state, ChainState::Stopped);
        let elsewhere = store.chain(&elsewhere.id).await.unwrap().unwrap();
        assert_eq!(elsewhere.state, ChainState::Open);
    }
}
