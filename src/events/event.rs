//! The kinds of event the stream carries. Each serialises to one JSON object with `type` (the
//! variant in snake case) and the ids it concerns; the bus adds `id` and `ts_ms`.

use baton_contract::{AccountId, ChatKey, MessageId, Platform};
use serde::Serialize;

use crate::bot_id::BotId;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A chat event reached a bot's pipeline: whether it woke the bot, and if not, why.
    EventReceived {
        /// `slack`, `discord`, `feishu`, `lark`, `local`.
        platform: Platform,
        /// The account that received it.
        account: AccountId,
        /// The bot behind the account.
        bot: BotId,
        /// The chat.
        chat: ChatKey,
        /// The platform's message id.
        message_id: MessageId,
        /// Who sent it (`bot:<id>` for a bot).
        sender: String,
        /// What became of it.
        outcome: Received,
        /// Why it did not wake the bot (a drop reason), when it did not.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A bot's turn started (its backend runs).
    TurnStarted {
        /// The bot.
        bot: BotId,
        /// The session.
        session: String,
        /// The run.
        run_id: String,
    },
    /// A bot's turn ended.
    TurnEnded {
        /// The bot.
        bot: BotId,
        /// The session.
        session: String,
        /// The run.
        run_id: String,
        /// Reply, silence or failure.
        outcome: TurnOutcome,
        /// The model that answered (empty after a failure).
        model: String,
        /// How long the backend took.
        elapsed_ms: u64,
    },
    /// A turn called a tool.
    ToolCall {
        /// The bot.
        bot: BotId,
        /// The session.
        session: String,
        /// The run.
        run_id: String,
        /// The tool.
        tool: String,
        /// The model's id for the call.
        call_id: String,
    },
    /// A tool answered.
    ToolResult {
        /// The bot.
        bot: BotId,
        /// The session.
        session: String,
        /// The run.
        run_id: String,
        /// The tool.
        tool: String,
        /// The model's id for the call.
        call_id: String,
        /// The result's `status` field, when it has one (`ok`, `refused`, `timeout`, ...).
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
    /// A line was written to a session's transcript (read it with `/api/transcript`).
    Entry {
        /// The entry's id in the transcript.
        entry: i64,
        /// The session.
        session: String,
        /// The bot whose session it is.
        bot: BotId,
        /// The run it belongs to.
        run_id: String,
        /// `inbound`, `reply`, `tool_call`, ...
        kind: String,
        /// Who said it.
        speaker: String,
    },
    /// A bot-to-bot delivery (`sessions_send`) changed state.
    Delivery {
        /// The delivery's run id.
        run_id: String,
        /// The sending bot.
        sender: BotId,
        /// The sender's session.
        sender_session: String,
        /// The target bot.
        target: BotId,
        /// The target's session.
        target_session: String,
        /// `queued`, `running`, `delivered`, `failed`, `timed_out`, `refused`.
        state: String,
        /// Why it was refused or failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The model that answered.
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A bot reported how far its turn has got (`progress`), on a delivery or not.
    Progress {
        /// The turn's run id (the delivery's, for a delivery).
        run_id: String,
        /// The bot working on it.
        bot: BotId,
        /// Its session.
        session: String,
        /// What it said.
        message: String,
        /// Which step it is on, if it said.
        #[serde(skip_serializing_if = "Option::is_none")]
        step: Option<u32>,
        /// Of how many, if it said.
        #[serde(skip_serializing_if = "Option::is_none")]
        of: Option<u32>,
    },
    /// A chain moved: `created`, `turn_given`, `posted`, `returned`, `closed`.
    Chain {
        /// The chain.
        chain: String,
        /// The move.
        #[serde(rename = "move")]
        step: String,
        /// The bot concerned (who got the turn, who posted), when one is.
        #[serde(skip_serializing_if = "Option::is_none")]
        bot: Option<String>,
        /// Who holds the turn after the move (`baton`, a bot, `nobody`).
        holder: String,
        /// `open`, `completed`, `stopped`, ...
        state: String,
    },
    /// A guard refused something.
    GuardRefused {
        /// `bot_messages`, `inbound_rate`, `lanes`, `sessions_send`, `chain`.
        guard: String,
        /// Why.
        reason: String,
        /// The bot concerned.
        bot: BotId,
        /// `<platform>:<chat>`, when there is one.
        #[serde(skip_serializing_if = "Option::is_none")]
        chat: Option<ChatKey>,
    },
    /// An account's connection changed state.
    Connection {
        /// The platform.
        platform: String,
        /// The account.
        account: String,
        /// The bot behind it.
        bot: BotId,
        /// `connecting`, `connected`, `retrying`, `stopped`.
        state: String,
        /// Reconnect attempts so far, while retrying.
        #[serde(skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
    },
}

/// What became of a received event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Received {
    /// It woke the bot: a turn follows.
    Wake,
    /// Not addressed to the bot: kept as context.
    Buffered,
    /// An admin command, answered without a turn.
    Admin,
    /// A human's answer to a bot's question, routed back.
    Answered,
    /// Dropped before a turn (see `reason`).
    Dropped,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The bot replied.
    Reply,
    /// The bot chose silence.
    Silent,
    /// The backend failed or ran out of time.
    Failed,
}

impl TurnOutcome {
    /// Its name, as the event's JSON writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Reply => "reply",
            TurnOutcome::Silent => "silent",
            TurnOutcome::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_with_their_type_and_ids() {
        let event = Event::Chain {
            chain: "ch-1".into(),
            step: "turn_given".into(),
            bot: Some("caid".into()),
            holder: "caid".into(),
            state: "open".into(),
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({"type": "chain", "chain": "ch-1", "move": "turn_given",
                               "bot": "caid", "holder": "caid", "state": "open"})
        );
        let ended = Event::TurnEnded {
            bot: "a".parse().unwrap(),
            session: "s".into(),
            run_id: "r".into(),
            outcome: TurnOutcome::Silent,
            model: "echo".into(),
            elapsed_ms: 3,
        };
        let json = serde_json::to_value(&ended).unwrap();
        assert_eq!(json["type"], "turn_ended");
        assert_eq!(json["outcome"], "silent");
    }
}
