//! What a transcript entry records ([`EntryKind`]) and whose words it holds ([`Origin`]): the
//! transcript (`transcript.rs`) and the kept session tails (`tail_cache.rs`) both read them.

stored_name! {
    /// What an entry records.
    EntryKind, "entry kind" {
        /// A message that reached the bot (from a human, or another bot).
        Inbound = "inbound",
        /// A chunk of the bot's reply, as delivered.
        Reply = "reply",
        /// The bot's answer to another bot (a `sessions_send`), returned to the sender rather
        /// than posted in a chat.
        Answer = "answer",
        /// The bot's turn ended in silence (kept so the record shows it chose not to speak).
        Silent = "silent",
        /// Something failed (a turn, a delivery); never silently lost.
        Failure = "failure",
        /// The bot called a tool.
        ToolCall = "tool_call",
        /// A tool's answer.
        ToolResult = "tool_result",
        /// An admin command and its answer.
        Admin = "admin",
        /// A message from the gateway itself (rate-limit notice, pairing code, ...).
        Notice = "notice",
    }
}

stored_name! {
    /// Who an entry's words come from, so a bot's words are never taken for a human's.
    Origin, "origin" {
        /// A person on the platform.
        Human = "human",
        /// A bot (this one, or another speaking to it).
        Bot = "bot",
        /// baton itself.
        Gateway = "gateway",
    }
}
