//! The agent tools: what a bot's backend (or an MCP client speaking as a
//! bot) can call to find other bots, read sessions, hand work over and ask a human.
//!
//! [`AgentTools`] is the [`ToolExecutor`] a turn gets. It knows who is calling ([`Caller`]):
//! the bot, its session, the run it is in, how deep in a chain of sends the turn is and which
//! bot's send caused it. The guards need exactly that, so the same rules hold whether the call
//! comes from a model in a turn or from an external runtime over `/mcp`.

mod artifacts;
mod bots;
mod chains;
mod escalate;
mod progress;
mod reply_attach;
mod send;
mod sessions;

#[cfg(test)]
mod testing;

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::backend::{ToolCall, ToolExecutor};
use crate::chains::Chains;
use crate::engine::{BindTools, Caller, Engine};
use crate::field_bound::{self, Cap};
use crate::relay::{Relay, RelayState};
use crate::roster::ToolName;

/// The tools one turn may call, bound to its caller.
pub struct AgentTools {
    engine: Engine,
    relay: Relay,
    /// The chain tools' flow, over the same engine.
    chains: Chains,
    caller: Caller,
}

impl AgentTools {
    /// Tools for `caller`, sending to other bots through `relay` and taking chain turns over
    /// its engine.
    pub fn new(relay: Relay, caller: Caller) -> AgentTools {
        AgentTools {
            engine: relay.engine().clone(),
            chains: Chains::new(relay.engine().clone()),
            relay,
            caller,
        }
    }

    /// How the engine gives a turn its tools ([`BindTools`]): each turn's tools send through
    /// a relay over the turn's engine, with the relay's one `state`.
    ///
    /// [`BindTools`]: crate::engine::BindTools
    pub fn binder(state: Arc<RelayState>) -> BindTools {
        Arc::new(move |engine, caller| {
            let relay = Relay::new(engine, Arc::clone(&state));
            Box::new(AgentTools::new(relay, caller))
        })
    }

    /// Who is calling.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The tools the caller may use, as shown to a model (or listed over MCP).
    pub fn specs(&self) -> Arc<[crate::backend::ToolSpec]> {
        self.engine
            .roster()
            .bot(&self.caller.bot)
            .map_or_else(|| Arc::from([]), |bot| bot.tools.specs())
    }

    async fn run(&self, tool: ToolName, args: Value) -> Value {
        match tool {
            ToolName::BotsList => bots::list(&self.engine),
            ToolName::SessionsList => sessions::list(self, args).await,
            ToolName::SessionsHistory => sessions::history(self, args).await,
            ToolName::SessionStatus => sessions::status(self, args).await,
            ToolName::SessionsSend => send::call(self, args).await,
            ToolName::EscalateToUser => escalate::escalate(self, args).await,
            ToolName::ResolveAgentApproval => escalate::resolve(self, args).await,
            ToolName::ChainCreate => chains::create(self, args).await,
            ToolName::ChainAdd | ToolName::ChainPass => chains::hand(self, tool, args).await,
            ToolName::ChainMessage => chains::message(self, args).await,
            ToolName::ChainClose => chains::close(self, args).await,
            ToolName::ChainStatus => chains::status(self, args).await,
            ToolName::ArtifactPut => artifacts::put(self, args).await,
            ToolName::ArtifactGet => artifacts::get(self, args).await,
            ToolName::ArtifactsList => artifacts::list(self, args).await,
            ToolName::Progress => progress::report(self, args).await,
            ToolName::ReplyAttach => reply_attach::call(self, args).await,
        }
    }
}

#[async_trait]
impl ToolExecutor for AgentTools {
    async fn call(&self, call: &ToolCall) -> Value {
        let Some(bot) = self.engine.roster().bot(&self.caller.bot) else {
            return error(format!("unknown bot `{}`", self.caller.bot));
        };
        let Some(tool) = bot.tools.allowed(&call.name) else {
            return error(format!(
                "tool `{}` is not available to bot `{}`; add it to the bot's `tools` list in \
                 the config",
                call.name, self.caller.bot
            ));
        };
        let args = if call.arguments.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str(&call.arguments) {
                Ok(args) => args,
                Err(err) => return error(format!("arguments are not valid JSON: {err}")),
            }
        };
        self.run(tool, args).await
    }
}

/// A tool result saying the call could not be made, and why.
pub(crate) fn error(message: impl Into<String>) -> Value {
    json!({"status": "error", "error": message.into()})
}

/// The arguments of a call as `T`, or an error result naming what is wrong: a field that will
/// not parse, or one over its cap ([`cap_of`]).
pub(crate) fn args<T: DeserializeOwned>(tool: ToolName, args: Value) -> Result<T, Value> {
    let bad = |err: &dyn std::fmt::Display| error(format!("bad arguments for {tool}: {err}"));
    if let Value::Object(fields) = &args {
        for (field, value) in fields {
            field_bound::check(field, value, cap_of(field)).map_err(|err| bad(&err))?;
        }
    }
    serde_json::from_value(args).map_err(|err| bad(&err))
}

/// The cap of a tool argument, by its name: a name means the same in every tool. What is not
/// text, content, a list or free JSON is an id or a name.
fn cap_of(field: &str) -> Cap {
    match field {
        "message" | "prompt" | "content" | "summary" | "note" => Cap::Text,
        // An artifact's content: `[artifacts] max_bytes`, checked by `artifact_put`.
        "text" | "base64" => Cap::Elsewhere,
        "expect" => Cap::Json,
        "participants" | "artifacts" | "inputs" | "ids" => Cap::List(&Cap::Id),
        _ => Cap::Id,
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{error_of, in_room};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    fn tool_call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// A bot calls only the tools its `tools` list gives it, whatever its model asks for.
    #[tokio::test]
    async fn a_tool_off_the_bots_list_is_refused_and_arguments_must_be_json() {
        let narrow = "\n[[bots]]\nid = \"narrow\"\nbackend = \"echo\"\ntools = [\"bots_list\"]\n";
        let gw = parts(&echo_config(&["lead"], narrow)).await;
        let tools = in_room(&gw.relay, "narrow", Some("run-1"));
        let listed = tools.call(&tool_call("bots_list", "")).await;
        assert_eq!(listed["status"], "ok", "{listed}");
        let off = tools.call(&tool_call("sessions_send", "{}")).await;
        assert!(
            error_of(&off).contains("not available to bot `narrow`"),
            "{off}"
        );
        let unknown = tools.call(&tool_call("rm_rf", "{}")).await;
        assert!(error_of(&unknown).contains("not available"), "{unknown}");
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let garbled = lead.call(&tool_call("sessions_list", "{not json")).await;
        assert!(error_of(&garbled).contains("not valid JSON"), "{garbled}");
    }
}
