//! What the chains' unit tests share: a chain in a local room, the turn given without its turn
//! running, and waiting for a chain to end.

use std::time::Duration;

use baton_contract::{AccountId, ChatId, Platform};

use super::{Opening, Place, Start, start};
use crate::engine::Engine;
use crate::store::{Chain, ChainState, Handed, Handoff};
use crate::timing::now_ms;

/// The local chat `room`, baton speaking through `lead`'s account.
pub(super) fn room() -> Place {
    Place {
        platform: Platform::Local,
        chat: ChatId::from("room"),
        thread: None,
        anchor: None,
        account: AccountId::from("lead"),
    }
}

/// A chain in [`room`] that `ann` started with a command.
pub(super) fn start_in_room(coordinator: Option<&str>, participants: &[&str]) -> Start {
    Start {
        name: "plan".into(),
        coordinator: coordinator.map(str::to_owned),
        participants: participants.iter().map(|p| (*p).to_owned()).collect(),
        place: room(),
        started_by: "ann".into(),
        trigger: None,
        opening: Opening::CommandAnswer,
    }
}

/// A chain started in [`room`]; the coordinator holds the turn.
pub(super) async fn started(
    engine: &Engine,
    coordinator: Option<&str>,
    participants: &[&str],
) -> Chain {
    start(engine, start_in_room(coordinator, participants))
        .await
        .expect("chain started")
}

/// `to` holds the turn of `chain` now, as a handoff leaves it, but no turn of it runs.
pub(super) async fn given(engine: &Engine, chain: &Chain, to: &str) -> Chain {
    let handoff = Handoff {
        chain: chain.id.clone(),
        by: chain.coordinator_name().to_owned(),
        to: to.parse().expect("bot id"),
        prompt: "your view?".to_owned(),
        add: false,
        max_rounds: engine.config().chains.max_rounds,
    };
    match engine.store().chain_hand(handoff, now_ms()).await {
        Ok(Handed::Given(chain)) => chain,
        other => panic!("the turn was not given: {other:?}"),
    }
}

/// `chain` once it is closed (panics after 20 s).
pub(super) async fn until_closed(engine: &Engine, chain: &str) -> Chain {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = engine.store().chain(chain).await.unwrap().expect("chain");
        if now.state != ChainState::Open {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "chain still open: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
