//! Which agent tools exist, what a model is told about each, and which ones a bot may call.
//!
//! A bot's `tools` list (names or globs) is compiled once into a [`ToolSet`]. Each tool is
//! offered under the name the list matched: its primary name, or else its alias, so a config that
//! says `bots_send_message` shows the model that name. A call by either name works as long as the
//! tool is in the set.

use std::fmt;
use std::sync::Arc;

use globset::GlobSet;
use serde_json::{Value, json};

use crate::backend::ToolSpec;

/// Every agent tool baton runs itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    /// `bots_list`: the roster.
    BotsList,
    /// `sessions_list`: the sessions the store holds.
    SessionsList,
    /// `sessions_history`: one session's transcript.
    SessionsHistory,
    /// `session_status`: one session's state and its deliveries.
    SessionStatus,
    /// `sessions_send`: hand another bot a message and get its reply.
    SessionsSend,
    /// `escalate_to_user`: ask the human side of the originating conversation.
    EscalateToUser,
    /// `resolve_agent_approval`: approve or deny a pending approval request.
    ResolveAgentApproval,
    /// `chain_create`: start a chain in this chat, coordinated by the caller.
    ChainCreate,
    /// `chain_add`: bring a bot into a chain and give it the turn.
    ChainAdd,
    /// `chain_message`: post in a chain, on one's turn.
    ChainMessage,
    /// `chain_pass`: hand the turn to a participant.
    ChainPass,
    /// `chain_close`: end a chain (its coordinator).
    ChainClose,
    /// `chain_status`: a chain's state and everything said in it.
    ChainStatus,
    /// `artifact_put`: keep a blob (text or base64) as an artifact.
    ArtifactPut,
    /// `artifact_get`: an artifact's record and content.
    ArtifactGet,
    /// `artifacts_list`: the artifacts of a session or a run.
    ArtifactsList,
    /// `progress`: report how far the turn (the delivery being worked on) has got.
    Progress,
    /// `reply_attach`: post artifacts as files with this turn's reply.
    ReplyAttach,
}

impl ToolName {
    /// Every tool, in the order they are offered.
    pub const ALL: [ToolName; 18] = [
        ToolName::BotsList,
        ToolName::SessionsList,
        ToolName::SessionsHistory,
        ToolName::SessionStatus,
        ToolName::SessionsSend,
        ToolName::EscalateToUser,
        ToolName::ResolveAgentApproval,
        ToolName::ChainCreate,
        ToolName::ChainAdd,
        ToolName::ChainMessage,
        ToolName::ChainPass,
        ToolName::ChainClose,
        ToolName::ChainStatus,
        ToolName::ArtifactPut,
        ToolName::ArtifactGet,
        ToolName::ArtifactsList,
        ToolName::Progress,
        ToolName::ReplyAttach,
    ];

    /// The primary name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::BotsList => "bots_list",
            ToolName::SessionsList => "sessions_list",
            ToolName::SessionsHistory => "sessions_history",
            ToolName::SessionStatus => "session_status",
            ToolName::SessionsSend => "sessions_send",
            ToolName::EscalateToUser => "escalate_to_user",
            ToolName::ResolveAgentApproval => "resolve_agent_approval",
            ToolName::ChainCreate => "chain_create",
            ToolName::ChainAdd => "chain_add",
            ToolName::ChainMessage => "chain_message",
            ToolName::ChainPass => "chain_pass",
            ToolName::ChainClose => "chain_close",
            ToolName::ChainStatus => "chain_status",
            ToolName::ArtifactPut => "artifact_put",
            ToolName::ArtifactGet => "artifact_get",
            ToolName::ArtifactsList => "artifacts_list",
            ToolName::Progress => "progress",
            ToolName::ReplyAttach => "reply_attach",
        }
    }

    /// The second name some agent runtimes know the tool by.
    pub fn alias(self) -> Option<&'static str> {
        match self {
            ToolName::BotsList => Some("bots_list_available"),
            ToolName::SessionsSend => Some("bots_send_message"),
            _ => None,
        }
    }

    /// The tool called `name` (primary name or alias).
    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL
            .into_iter()
            .find(|t| t.as_str() == name || t.alias() == Some(name))
    }

    /// What the model is told the tool does.
    fn description(self) -> &'static str {
        match self {
            ToolName::BotsList => {
                "List the other bots you can work with: id, name, description, backend, model and \
                 the platforms each is on. Use it to find who to hand a task to."
            }
            ToolName::SessionsList => {
                "List conversations (sessions) baton holds, newest first: key, bot, platform, \
                 chat, last activity. Optionally only one bot's."
            }
            ToolName::SessionsHistory => {
                "Read the transcript of one session: who said what, tool calls and bot-to-bot \
                 messages, oldest first."
            }
            ToolName::SessionStatus => {
                "The state of one session: last activity, whether a turn is running, and the \
                 bot-to-bot deliveries in flight to and from it."
            }
            ToolName::SessionsSend => {
                "Send a message to another bot and get its reply. The target runs a turn with \
                 your message (it sees it as coming from you) and its answer is returned here. \
                 If it times out, the answer is delivered to your session later: do not send \
                 the same thing again. timeout_seconds = 0 sends without waiting. Hand it files \
                 with `artifacts`; with `expect` (a JSON Schema) its answer comes back checked, \
                 as `output`. The result lists the artifacts it made."
            }
            ToolName::EscalateToUser => {
                "Ask the human in the conversation this work started from. Your question is \
                 posted there; their answer comes back to your session as a new message. \
                 Set approval = true to ask for an approve/deny decision instead."
            }
            ToolName::ResolveAgentApproval => {
                "Approve or deny an approval request another bot raised with escalate_to_user. \
                 The requesting bot is told the decision."
            }
            ToolName::ChainCreate => {
                "Start a chain in this chat: an ordered conversation among bots where one bot \
                 speaks at a time. You coordinate it and hold the turn; returns the chain id. \
                 Then give the turn with chain_pass or chain_add."
            }
            ToolName::ChainAdd => {
                "Bring a bot into your chain and give it the turn, with the whole chain so far \
                 plus your prompt. The turn comes back to you after it posts."
            }
            ToolName::ChainMessage => {
                "Post in a chain. Only the bot holding the turn may post; the post appears in \
                 the chat under your name and the turn goes back to the coordinator."
            }
            ToolName::ChainPass => {
                "Coordinator only: hand the turn to a participant, with the whole chain so far \
                 plus your prompt. It comes back to you after that bot posts (or times out)."
            }
            ToolName::ChainClose => {
                "Coordinator only: end the chain; it is marked completed and nobody posts in it \
                 again."
            }
            ToolName::ChainStatus => {
                "A chain's state: coordinator, participants, who holds the turn, and everything \
                 said and handed over so far. Without `chain`, the chains you are in."
            }
            ToolName::ArtifactPut => {
                "Keep a file as an artifact other bots can read by its id: give `text`, or \
                 `base64` for binary content. Name the artifacts it was made from in `inputs`. \
                 Returns the id (art-...); hand it to another bot in sessions_send `artifacts`."
            }
            ToolName::ArtifactGet => {
                "Read an artifact: its name, media type, size, who made it from what, and its \
                 content (text, or base64 for binary; a large one comes as a URL instead)."
            }
            ToolName::ArtifactsList => {
                "List artifacts: those made in a session, or by one run (a sessions_send's \
                 run_id). Without arguments, the ones made in your session."
            }
            ToolName::Progress => {
                "Say how far you have got on a long task: a short line, optionally step N of M. \
                 On a task another bot sent you (sessions_send), the sender sees the latest in \
                 session_status; in a chat, it shows as your typing status where the platform \
                 has one."
            }
            ToolName::ReplyAttach => {
                "Attach artifacts (by id) to your reply in this turn: each is posted as a file \
                 in the chat, after your text, in the same thread. Make one with artifact_put \
                 first. Your text may be empty: the files are posted alone."
            }
        }
    }

    /// JSON schema of the arguments.
    fn parameters(self) -> Value {
        match self {
            ToolName::BotsList => object(json!({}), &[]),
            ToolName::SessionsList => object(
                json!({
                    "bot": {"type": "string", "description": "Only this bot's sessions."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}
                }),
                &[],
            ),
            ToolName::SessionsHistory => object(
                json!({
                    "session": {"type": "string", "description": "Session key, or a bot id for your default session with that bot."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20}
                }),
                &["session"],
            ),
            ToolName::SessionStatus => object(
                json!({
                    "session": {"type": "string", "description": "Session key, or a bot id for your default session with that bot."}
                }),
                &["session"],
            ),
            ToolName::SessionsSend => object(
                json!({
                    "target": {"type": "string", "description": "A bot id (its session for you), a session key, or a2a:<peer> for an A2A agent outside baton."},
                    "message": {"type": "string", "description": "What to ask or tell it."},
                    "timeout_seconds": {"type": "integer", "minimum": 0, "maximum": 1800, "default": 30,
                        "description": "How long to wait for the reply; 0 = do not wait (the reply comes to your session later)."},
                    "idempotency_key": {"type": "string", "description": "Same key = same request: a retry returns the first run's result instead of running again."},
                    "artifacts": {"type": "array", "items": {"type": "string"},
                        "description": "Ids of artifacts to hand over with the message (small text ones are shown inline, the rest by reference)."},
                    "expect": {"type": "object",
                        "description": "A JSON Schema the answer must match: the target is asked for JSON, the answer is checked (one retry) and returned parsed as `output`."}
                }),
                &["target", "message"],
            ),
            ToolName::EscalateToUser => object(
                json!({
                    "message": {"type": "string", "description": "The question for the human."},
                    "approval": {"type": "boolean", "default": false,
                        "description": "Ask for an approve/deny decision (answered with /baton approve|deny ID or resolve_agent_approval)."}
                }),
                &["message"],
            ),
            ToolName::ResolveAgentApproval => object(
                json!({
                    "approval_id": {"type": "string"},
                    "decision": {"type": "string", "enum": ["approve", "deny"]},
                    "note": {"type": "string", "description": "Why, for the requester."}
                }),
                &["approval_id", "decision"],
            ),
            ToolName::ChainCreate => object(
                json!({
                    "name": {"type": "string", "description": "What the chain is about; everyone sees it."},
                    "participants": {"type": "array", "items": {"type": "string"},
                        "description": "Bot ids taking part, in order (more can join with chain_add)."}
                }),
                &["name"],
            ),
            ToolName::ChainAdd | ToolName::ChainPass => object(
                json!({
                    "chain": {"type": "string", "description": "The chain id (ch-xxxxxx)."},
                    "bot": {"type": "string", "description": "The bot to give the turn to."},
                    "prompt": {"type": "string", "description": "What you ask of it this turn."}
                }),
                &["chain", "bot", "prompt"],
            ),
            ToolName::ChainMessage => object(
                json!({
                    "chain": {"type": "string", "description": "The chain id (ch-xxxxxx)."},
                    "content": {"type": "string", "description": "Your post."}
                }),
                &["chain", "content"],
            ),
            ToolName::ChainClose => object(
                json!({
                    "chain": {"type": "string", "description": "The chain id (ch-xxxxxx)."},
                    "summary": {"type": "string", "description": "Why it ends, for the record."}
                }),
                &["chain"],
            ),
            ToolName::ChainStatus => object(
                json!({
                    "chain": {"type": "string", "description": "The chain id; leave out for the chains you are in."}
                }),
                &[],
            ),
            ToolName::ArtifactPut => object(
                json!({
                    "name": {"type": "string", "description": "A file name, e.g. competitors.json."},
                    "text": {"type": "string", "description": "The content, as text."},
                    "base64": {"type": "string", "description": "The content, base64 (for binary files); instead of text."},
                    "media_type": {"type": "string", "description": "E.g. application/json; guessed from the name when left out."},
                    "inputs": {"type": "array", "items": {"type": "string"},
                        "description": "Ids of the artifacts this one was made from."}
                }),
                &["name"],
            ),
            ToolName::ArtifactGet => object(
                json!({
                    "id": {"type": "string", "description": "The artifact id (art-...)."}
                }),
                &["id"],
            ),
            ToolName::Progress => object(
                json!({
                    "message": {"type": "string", "description": "What you are doing now."},
                    "step": {"type": "integer", "minimum": 0},
                    "of": {"type": "integer", "minimum": 1}
                }),
                &["message"],
            ),
            ToolName::ReplyAttach => object(
                json!({
                    "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                        "description": "Artifact ids (art-...) to post as files with your reply."}
                }),
                &["ids"],
            ),
            ToolName::ArtifactsList => object(
                json!({
                    "session": {"type": "string", "description": "Session key, or a bot id for your default session with that bot."},
                    "run_id": {"type": "string", "description": "Only those made by this run."}
                }),
                &[],
            ),
        }
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The tools one bot may call, with the name each is offered under.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    offered: Vec<(ToolName, &'static str)>,
    /// What the model is shown, made once: building the JSON schemas for every turn was 7% of
    /// a bot-to-bot round trip's instructions (BENCHMARKS.md, issue 23).
    specs: Arc<[ToolSpec]>,
}

impl ToolSet {
    /// The tools `patterns` (a bot's `tools` list, compiled) allow.
    pub fn from_globs(patterns: &GlobSet) -> ToolSet {
        let offered = ToolName::ALL
            .into_iter()
            .filter_map(|tool| {
                if patterns.is_match(tool.as_str()) {
                    Some((tool, tool.as_str()))
                } else {
                    let alias = tool.alias().filter(|a| patterns.is_match(a))?;
                    Some((tool, alias))
                }
            })
            .collect::<Vec<_>>();
        let specs = offered
            .iter()
            .map(|(tool, name)| ToolSpec {
                name: (*name).to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.parameters(),
            })
            .collect();
        ToolSet { offered, specs }
    }

    /// The tool a call names, if this bot may call it.
    pub fn allowed(&self, name: &str) -> Option<ToolName> {
        let tool = ToolName::parse(name)?;
        self.offered.iter().any(|(t, _)| *t == tool).then_some(tool)
    }

    /// Whether the set holds `tool`.
    pub fn contains(&self, tool: ToolName) -> bool {
        self.offered.iter().any(|(t, _)| *t == tool)
    }

    /// What the model is shown: one spec per allowed tool.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        Arc::clone(&self.specs)
    }

    /// No tools at all.
    pub fn is_empty(&self) -> bool {
        self.offered.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roster::glob_set;

    fn set(patterns: &[&str]) -> ToolSet {
        let patterns: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
        ToolSet::from_globs(&glob_set(&patterns).unwrap())
    }

    #[test]
    fn globs_select_tools_and_aliases_name_them() {
        let tools = set(&["sessions_*", "bots_list"]);
        let names: Vec<String> = tools.specs().iter().map(|s| s.name.clone()).collect();
        assert_eq!(
            names,
            [
                "bots_list",
                "sessions_list",
                "sessions_history",
                "sessions_send"
            ]
        );
        assert_eq!(
            tools.allowed("bots_send_message"),
            Some(ToolName::SessionsSend)
        );
        assert_eq!(tools.allowed("escalate_to_user"), None);
        assert_eq!(tools.allowed("no_such_tool"), None);

        let aliased = set(&["bots_send_message"]);
        let names: Vec<String> = aliased.specs().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, ["bots_send_message"]);
        assert_eq!(
            aliased.allowed("sessions_send"),
            Some(ToolName::SessionsSend)
        );
        assert!(set(&[]).is_empty());
    }

    #[test]
    fn every_schema_is_an_object_with_its_required_properties() {
        for tool in ToolName::ALL {
            let schema = tool.parameters();
            assert_eq!(schema["type"], "object", "{tool}");
            for required in schema["required"].as_array().unwrap() {
                let name = required.as_str().unwrap();
                assert!(schema["properties"].get(name).is_some(), "{tool}: {name}");
            }
            assert_eq!(ToolName::parse(tool.as_str()), Some(tool));
        }
    }
}
