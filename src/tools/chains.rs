//! The chain tools: `chain_create`, `chain_add`, `chain_pass`, `chain_message`,
//! `chain_close`, `chain_status`. They are thin: the rules (who holds the turn, who may hand
//! it on, when it comes back) live in [`crate::chains`] and the store, so a bot calling a tool,
//! a bot's plain reply in its turn and an admin's command all meet the same checks.
//!
//! A refusal that is the rules working (not your turn, not the coordinator, chain closed) is a
//! `{"status":"refused","reason","message"}` result, like `sessions_send`'s guards; a mistake
//! (unknown bot or chain, empty text) is an error result saying what to send instead.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentTools, ToolName, args, error};
use crate::chains::{self, ChainFailure, Opening, Pass, Place, Start};
use crate::store::{Chain, ChainClose, ChainEntry, ChainQuery, ChainState, Handed};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    name: String,
    #[serde(default)]
    participants: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HandArgs {
    chain: String,
    bot: String,
    #[serde(default)]
    prompt: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageArgs {
    chain: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CloseArgs {
    chain: String,
    #[serde(default)]
    summary: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    #[serde(default)]
    chain: Option<String>,
}

/// Start a chain in the chat the caller's work started from, coordinated by the caller.
pub(super) async fn create(tools: &AgentTools, raw: Value) -> Value {
    let a: CreateArgs = match args(ToolName::ChainCreate, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    if a.name.trim().is_empty() {
        return error("`name` is empty; say what the chain is about");
    }
    let caller = &tools.caller;
    let Some(origin) = &caller.origin else {
        return error(
            "a chain posts in the chat it was started from, and this call did not come from a \
             chat (e.g. it came over MCP); start the chain from a bot's turn in a chat, or ask \
             an admin to run /baton chain start there",
        );
    };
    let engine = &tools.engine;
    let voice = engine
        .roster()
        .account_of_bot(origin.platform, &caller.bot)
        .map_or_else(|| origin.account.clone(), |a| a.id.clone());
    let start = Start {
        name: a.name,
        coordinator: Some(caller.bot.to_string()),
        participants: a.participants.iter().map(|p| bot_id(p)).collect(),
        place: Place {
            platform: origin.platform,
            chat: origin.chat.clone(),
            thread: origin.thread.clone(),
            anchor: None,
            account: voice,
        },
        started_by: caller.bot.to_string(),
        trigger: caller.trigger.clone(),
        opening: Opening::Announce,
    };
    match chains::start(engine, start).await {
        Ok(chain) => json!({
            "status": "ok",
            "chain": chain.id,
            "coordinator": caller.bot,
            "participants": chain.participants,
            "holder": caller.bot,
            "next": "You hold the turn. Give it to a participant with chain_pass (or bring a bot \
                     in with chain_add); close the chain with chain_close when the topic is done.",
        }),
        Err(err) => failure(&err),
    }
}

/// `chain_pass` (a participant) and `chain_add` (any bot, which joins): give it the turn.
pub(super) async fn hand(tools: &AgentTools, tool: ToolName, raw: Value) -> Value {
    let a: HandArgs = match args(tool, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let to = bot_id(&a.bot);
    let pass = Pass {
        chain: &a.chain,
        by: tools.caller.bot.as_str(),
        to: &to,
        prompt: &a.prompt,
        joins: tool == ToolName::ChainAdd,
    };
    match chains::hand(&tools.chains, pass).await {
        Ok(Handed::Given(chain)) => json!({
            "status": "ok",
            "chain": chain.id,
            "holder": to,
            "turn": chain.turn,
            "round": chain.round,
            "participants": chain.participants,
            "note": format!("{to} is taking its turn now; the turn comes back to you when it has \
                             posted (or passed, or timed out). Do not post for it."),
        }),
        Ok(Handed::Capped(chain)) => closed(&chain),
        Err(err) => failure(&err),
    }
}

/// Post in a chain, on the caller's turn.
pub(super) async fn message(tools: &AgentTools, raw: Value) -> Value {
    let a: MessageArgs = match args(ToolName::ChainMessage, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let bot = &tools.caller.bot;
    match chains::post(&tools.chains, &a.chain, bot, &a.content).await {
        Ok(posted) => {
            let chain = &posted.chain;
            let next = if posted.returned {
                format!(
                    "Posted. The turn is back with {}; your turn is over.",
                    chain.coordinator_name()
                )
            } else {
                "Posted. You coordinate, so you keep the turn.".to_owned()
            };
            json!({"status": "ok", "chain": chain.id, "holder": chain.holder_name(), "next": next})
        }
        Err(err) => failure(&err),
    }
}

/// End a chain (its coordinator only).
pub(super) async fn close(tools: &AgentTools, raw: Value) -> Value {
    let a: CloseArgs = match args(ToolName::ChainClose, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let engine = &tools.engine;
    let bot = &tools.caller.bot;
    let chain = match engine.store().chain(&a.chain).await {
        Ok(Some(chain)) => chain,
        Ok(None) => return error(format!("no chain `{}`; chain_status lists yours", a.chain)),
        Err(err) => return error(format!("could not read the chain: {err}")),
    };
    if !chains::is_coordinator(&chain, bot) {
        let err = ChainFailure::NotCoordinator {
            coordinator: chain.coordinator_name().to_owned(),
            id: chain.id,
            what: "close it",
        };
        return failure(&err);
    }
    let close = ChainClose {
        state: ChainState::Completed,
        by: bot.to_string(),
        reason: a
            .summary
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "closed by its coordinator".to_owned()),
        at_turn: None,
    };
    match chains::close(engine, &chain.id, close).await {
        Ok(Some(chain)) => json!({"status": "ok", "chain": chain.id, "state": chain.state}),
        Ok(None) => json!({"status": "ok", "chain": chain.id, "state": chain.state,
                           "note": "it was already closed"}),
        Err(err) => failure(&err),
    }
}

/// One chain with its log, or the chains the caller takes part in.
pub(super) async fn status(tools: &AgentTools, raw: Value) -> Value {
    let a: StatusArgs = match args(ToolName::ChainStatus, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let store = tools.engine.store();
    if let Some(id) = a.chain {
        let chain = match store.chain(&id).await {
            Ok(Some(chain)) => chain,
            Ok(None) => return error(format!("no chain `{id}`; leave out `chain` to list yours")),
            Err(err) => return error(format!("could not read the chain: {err}")),
        };
        let log = store.chain_entries(&chain.id).await.unwrap_or_default();
        let mut value = summary(&chain);
        value["status"] = json!("ok");
        value["messages"] = log.iter().map(entry).collect();
        return value;
    }
    let bot = &tools.caller.bot;
    let query = ChainQuery {
        open_in: None,
        limit: Some(200),
    };
    let chains = match store.chains(query).await {
        Ok(chains) => chains,
        Err(err) => return error(format!("could not read the chains: {err}")),
    };
    let mine: Vec<Value> = chains
        .iter()
        .filter(|c| chains::is_coordinator(c, bot) || c.participants.contains(bot))
        .take(20)
        .map(summary)
        .collect();
    json!({"status": "ok", "chains": mine})
}

fn summary(chain: &Chain) -> Value {
    json!({
        "chain": chain.id,
        "name": chain.name,
        "state": chain.state,
        "coordinator": chain.coordinator_name(),
        "holder": chain.holder_name(),
        "participants": chain.participants,
        "turn": chain.turn,
        "round": chain.round,
        "closed_reason": chain.closed_reason,
    })
}

fn entry(e: &ChainEntry) -> Value {
    json!({"turn": e.turn, "kind": e.kind, "sender": e.sender, "to": e.recipient,
           "content": e.content, "ts_ms": e.ts_ms})
}

fn closed(chain: &Chain) -> Value {
    json!({
        "status": "closed",
        "chain": chain.id,
        "state": chain.state,
        "reason": chain.closed_reason,
    })
}

fn failure(err: &ChainFailure) -> Value {
    match err.refusal() {
        Some(reason) => json!({"status": "refused", "reason": reason, "message": err.to_string()}),
        None => error(err.to_string()),
    }
}

/// A bot named with or without `@`.
fn bot_id(name: &str) -> String {
    name.trim().trim_start_matches('@').to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{error_of, in_room, refused};
    use super::*;
    use crate::engine::Caller;
    use crate::gateway::testing::{Parts, echo_config, parts};

    async fn gateway() -> Parts {
        parts(&echo_config(&["lead", "alpha", "beta"], "")).await
    }

    /// A chain `lead` coordinates in the room, with `alpha` taking part; its id.
    async fn led_by_lead(gw: &Parts) -> String {
        let created = create(
            &in_room(&gw.relay, "lead", Some("run-1")),
            json!({"name": "plan", "participants": ["alpha"]}),
        )
        .await;
        assert_eq!(created["status"], "ok", "{created}");
        created["chain"].as_str().unwrap().to_owned()
    }

    /// The caller coordinates and holds the turn; participants may be named with `@`; the
    /// chain posts in the caller's chat, where it is announced.
    #[tokio::test]
    async fn create_starts_a_chain_the_caller_coordinates_in_its_chat() {
        let gw = gateway().await;
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let created = create(
            &lead,
            json!({"name": "plan", "participants": ["@alpha", " beta"]}),
        )
        .await;
        assert_eq!(created["status"], "ok", "{created}");
        assert_eq!(
            (
                &created["coordinator"],
                &created["holder"],
                &created["participants"]
            ),
            (&json!("lead"), &json!("lead"), &json!(["alpha", "beta"]))
        );
        let id = created["chain"].as_str().unwrap();
        let chain = gw.engine.store().chain(id).await.unwrap().unwrap();
        assert_eq!(chain.origin.chat, "room");
        let room = gw.hub.messages("room", None).await.unwrap();
        assert!(
            room.iter()
                .any(|m| m.author == "lead" && m.text.contains(id)),
            "announced: {room:?}"
        );
    }

    #[tokio::test]
    async fn create_needs_a_name_known_bots_and_a_chat() {
        let gw = gateway().await;
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let unnamed = create(&lead, json!({"name": " "})).await;
        assert!(error_of(&unnamed).contains("`name` is empty"));
        let unknown = create(&lead, json!({"name": "plan", "participants": ["gamma"]})).await;
        assert!(error_of(&unknown).contains("no bot `gamma`"));
        let itself = create(&lead, json!({"name": "plan", "participants": ["lead"]})).await;
        assert!(error_of(&itself).contains("cannot also be a participant"));
        let session = "bot:lead:local:lead:room".parse().unwrap();
        let over_mcp = in_tools(&gw, Caller::external(&session));
        let chatless = create(&over_mcp, json!({"name": "plan"})).await;
        assert!(error_of(&chatless).contains("did not come from a chat"));
    }

    fn in_tools(gw: &Parts, caller: Caller) -> AgentTools {
        AgentTools::new(gw.relay.clone(), caller)
    }

    /// Refusals that are the rules working come back as `refused` with their reason.
    #[tokio::test]
    async fn only_the_holder_posts_and_only_the_coordinator_hands_on_or_closes() {
        let gw = gateway().await;
        let chain = led_by_lead(&gw).await;
        let alpha = in_room(&gw.relay, "alpha", Some("run-2"));
        let early = message(&alpha, json!({"chain": chain, "content": "me first"})).await;
        assert_eq!(refused(&early), "not-holder");
        assert!(
            early["message"]
                .as_str()
                .unwrap()
                .contains("lead holds turn")
        );
        let pass = hand(
            &alpha,
            ToolName::ChainPass,
            json!({"chain": chain, "bot": "beta"}),
        )
        .await;
        assert_eq!(refused(&pass), "not-coordinator");
        let closing = close(&alpha, json!({"chain": chain})).await;
        assert_eq!(refused(&closing), "not-coordinator");
        let state = gw
            .engine
            .store()
            .chain(&chain)
            .await
            .unwrap()
            .unwrap()
            .state;
        assert_eq!(state, ChainState::Open);
    }

    /// `chain_pass` is for participants; `chain_add` brings a bot in with the turn.
    #[tokio::test]
    async fn pass_gives_the_turn_to_a_participant_and_add_brings_one_in() {
        let gw = gateway().await;
        let chain = led_by_lead(&gw).await;
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let outsider = hand(
            &lead,
            ToolName::ChainPass,
            json!({"chain": chain, "bot": "beta"}),
        )
        .await;
        assert!(error_of(&outsider).contains("bring it in with chain_add"));
        let added = hand(
            &lead,
            ToolName::ChainAdd,
            json!({"chain": chain, "bot": "@beta", "prompt": "risks?"}),
        )
        .await;
        assert_eq!(added["status"], "ok", "{added}");
        assert_eq!(added["holder"], "beta");
        assert_eq!(added["participants"], json!(["alpha", "beta"]));
    }

    #[tokio::test]
    async fn the_coordinator_posting_keeps_the_turn() {
        let gw = gateway().await;
        let chain = led_by_lead(&gw).await;
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let empty = message(&lead, json!({"chain": chain, "content": "  "})).await;
        assert!(error_of(&empty).contains("`content` is empty"));
        let posted = message(&lead, json!({"chain": chain, "content": "the agenda"})).await;
        assert_eq!(posted["status"], "ok", "{posted}");
        assert_eq!(posted["holder"], "lead");
        assert!(
            posted["next"]
                .as_str()
                .unwrap()
                .contains("you keep the turn")
        );
    }

    /// The coordinator's summary is the chain's closing reason.
    #[tokio::test]
    async fn the_coordinator_closes_a_chain_once() {
        let gw = gateway().await;
        let chain = led_by_lead(&gw).await;
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let closed = close(&lead, json!({"chain": chain, "summary": "agreed"})).await;
        assert_eq!(
            (&closed["status"], &closed["state"]),
            (&json!("ok"), &json!("completed"))
        );
        let stored = gw.engine.store().chain(&chain).await.unwrap().unwrap();
        assert_eq!(stored.closed_reason.as_deref(), Some("agreed"));
        let again = close(&lead, json!({"chain": chain})).await;
        assert_eq!(again["note"], "it was already closed", "{again}");
        let unknown = close(&lead, json!({"chain": "ch-nope"})).await;
        assert!(error_of(&unknown).contains("no chain `ch-nope`"));
    }

    #[tokio::test]
    async fn status_lists_the_callers_chains_or_shows_one_with_its_log() {
        let gw = gateway().await;
        let chain = led_by_lead(&gw).await;
        let listed = |result: Value| -> Vec<String> {
            assert_eq!(result["status"], "ok", "{result}");
            let chains = result["chains"].as_array().unwrap();
            chains
                .iter()
                .map(|c| c["chain"].as_str().unwrap().to_owned())
                .collect()
        };
        let mine = listed(status(&in_room(&gw.relay, "alpha", None), json!({})).await);
        assert_eq!(mine, [chain.as_str()]);
        let theirs = listed(status(&in_room(&gw.relay, "beta", None), json!({})).await);
        assert_eq!(theirs, [] as [String; 0]);

        let one = status(&in_room(&gw.relay, "beta", None), json!({"chain": chain})).await;
        assert_eq!(
            (&one["holder"], &one["state"]),
            (&json!("lead"), &json!("open"))
        );
        assert!(
            one["messages"].as_array().is_some_and(|m| !m.is_empty()),
            "{one}"
        );
        let unknown = status(
            &in_room(&gw.relay, "beta", None),
            json!({"chain": "ch-nope"}),
        )
        .await;
        assert!(error_of(&unknown).contains("no chain `ch-nope`"));
    }
}
