//! What a bot is given for a turn (step 10's input): its system prompt, the chat's history
//! buffer, the tail of its session, and the message that woke it — in that order.

use std::sync::Arc;

use crate::backend::{
    ChatLine, Image, PostedFile, Role, TURN_SCHEMA_VERSION, ToolSpec, Trigger, TurnChat,
    TurnRequest, session_id,
};
use crate::roster::{Bot, Persona};
use crate::session::SessionKey;
use crate::store::{EntryKind, HistoryEntry, TailEntry};

/// How many transcript entries of the session are replayed to the model.
pub(crate) const SESSION_TAIL: usize = 40;

/// The message being answered.
pub(crate) struct Current<'a> {
    /// Speaker name for the model.
    pub name: &'a str,
    /// The text.
    pub text: &'a str,
    /// The files posted with it.
    pub attached: Attached<'a>,
    /// Who said it, for an agent.
    pub trigger: Trigger,
}

/// The files that came with a message: listed for the backend ([`TurnRequest::files`]), and the
/// images among them shown to a model that reads images.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attached<'a> {
    /// Every file, read or not.
    pub files: &'a [PostedFile],
    /// The images given as image parts (empty unless the bot has `vision = true`).
    pub images: &'a [Image],
}

impl Attached<'static> {
    /// A message without files.
    pub(crate) const NONE: Attached<'static> = Attached {
        files: &[],
        images: &[],
    };
}

/// Assemble the turn, as `bot` is in its chat (`persona`: the chat's model and system prompt
/// for it, over its own), in conversation `conversation` of its session (its reset point).
#[allow(clippy::too_many_arguments)]
pub(crate) fn turn_request(
    bot: &Bot,
    persona: &Persona,
    session: &SessionKey,
    conversation: i64,
    history: &[HistoryEntry],
    tail: &[Arc<TailEntry>],
    current: Current<'_>,
    tools: Arc<[ToolSpec]>,
) -> TurnRequest {
    let mut messages = Vec::with_capacity(tail.len() + 3);
    let system_prompt = persona
        .system_prompt
        .as_deref()
        .unwrap_or(bot.system_prompt.as_str());
    if !system_prompt.is_empty() {
        messages.push(ChatLine::new(Role::System, system_prompt));
    }
    if !history.is_empty() {
        messages.push(ChatLine::new(Role::User, history_text(history)));
    }
    messages.extend(tail_lines(tail));
    let mut line = ChatLine::new(Role::User, current.text);
    line.name = Some(current.name.to_owned());
    line.images = current.attached.images.to_vec();
    messages.push(line);
    let rendered = session.render();
    TurnRequest {
        version: TURN_SCHEMA_VERSION,
        bot: bot.id().to_owned(),
        model: persona
            .model
            .clone()
            .or_else(|| bot.config.model.clone())
            .unwrap_or_default(),
        messages,
        tools,
        session_id: session_id(&rendered, conversation),
        session: rendered,
        chat: TurnChat {
            platform: session.platform.as_str().to_owned(),
            account: session.account.as_str().to_owned(),
            id: session.chat.as_str().to_owned(),
            thread: session.thread.as_ref().map(|t| t.as_str().to_owned()),
        },
        trigger: current.trigger,
        access: None,
        files: current.attached.files.to_vec(),
    }
}

/// The history buffer as one context line, oldest first.
fn history_text(history: &[HistoryEntry]) -> String {
    let mut text = String::from(
        "Earlier messages in this chat that were not addressed to you (context only):\n",
    );
    for entry in history {
        text.push_str(&entry.speaker);
        text.push_str(": ");
        text.push_str(&entry.text);
        text.push('\n');
    }
    text
}

/// The session's inbound messages and replies as chat lines; the chunks of one reply are
/// joined back into one assistant line.
fn tail_lines(tail: &[Arc<TailEntry>]) -> Vec<ChatLine> {
    let mut lines: Vec<ChatLine> = Vec::with_capacity(tail.len());
    let mut last_run: Option<&str> = None;
    for entry in tail {
        match entry.kind {
            EntryKind::Inbound => {
                let mut line = ChatLine::new(Role::User, entry.text.as_str());
                line.name = entry.name.clone();
                lines.push(line);
                last_run = None;
            }
            EntryKind::Reply | EntryKind::Answer => {
                let same_run = last_run.is_some() && last_run == entry.run_id.as_deref();
                match lines.last_mut() {
                    Some(prev) if same_run => {
                        prev.content.push('\n');
                        prev.content.push_str(&entry.text);
                    }
                    _ => lines.push(ChatLine::new(Role::Assistant, entry.text.as_str())),
                }
                last_run = entry.run_id.as_deref();
            }
            _ => {}
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EntryKind, text: &str, run: Option<&str>) -> Arc<TailEntry> {
        Arc::new(TailEntry {
            kind,
            text: text.into(),
            run_id: run.map(str::to_owned),
            name: Some("Alice".into()),
        })
    }

    #[test]
    fn chunks_of_one_reply_are_joined_and_other_kinds_skipped() {
        let tail = [
            entry(EntryKind::Inbound, "q1", None),
            entry(EntryKind::Reply, "a1-part1", Some("r1")),
            entry(EntryKind::Reply, "a1-part2", Some("r1")),
            entry(EntryKind::Silent, "", Some("r2")),
            entry(EntryKind::Inbound, "q2", None),
        ];
        let lines = tail_lines(&tail);
        let roles: Vec<_> = lines.iter().map(|l| (l.role, l.content.as_str())).collect();
        assert_eq!(
            roles,
            vec![
                (Role::User, "q1"),
                (Role::Assistant, "a1-part1\na1-part2"),
                (Role::User, "q2")
            ]
        );
        assert_eq!(lines[0].name.as_deref(), Some("Alice"));
    }

    #[test]
    fn history_is_one_context_line_in_order() {
        let h = |s: &str, t: &str| HistoryEntry {
            message_id: t.into(),
            sender_id: s.into(),
            speaker: s.into(),
            text: t.into(),
            ts_ms: 0,
        };
        let text = history_text(&[h("alice", "one"), h("bob", "two")]);
        assert!(text.ends_with("alice: one\nbob: two\n"), "{text}");
    }
}
