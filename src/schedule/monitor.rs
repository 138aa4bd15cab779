//! Group monitoring: a scheduled turn aimed at a chat is shown the chat's history buffer (the
//! messages that woke no bot), each line with its message id, and may answer one of them in its
//! thread by starting its reply with the reply directive, `>> <message id> `.
//!
//! This is how a bot picks up a question nobody mentioned it for, on platforms where bots
//! cannot see each other's messages (Feishu): the heartbeat looks, and answers where it should.
//! The directive is honoured only for ids the bot was shown in that turn, so a made-up id
//! cannot aim a reply anywhere else; a reply with an unknown id goes to the chat, without the
//! directive.

use crate::store::HistoryEntry;

/// What a reply starts with to answer a message in its thread.
pub const REPLY_DIRECTIVE: &str = ">>";

/// The history buffer as the scheduled turn's context: oldest first, each line with its id,
/// and how to answer one in its thread.
pub(super) fn history_section(chat: &str, history: &[HistoryEntry]) -> String {
    let mut text = format!(
        "Messages in {chat} that were not addressed to you, since you last looked (oldest \
         first, each with its message id):\n"
    );
    for entry in history {
        text.push_str(&format!(
            "[{}] {}: {}\n",
            entry.message_id, entry.speaker, entry.text
        ));
    }
    text.push_str(&format!(
        "To answer one of them in its thread, start your reply with `{REPLY_DIRECTIVE} <message \
         id> ` and then the answer, e.g. `{REPLY_DIRECTIVE} {} ...`. Otherwise your reply goes \
         to the chat.",
        history.first().map_or("m1", |e| e.message_id.as_str())
    ));
    text
}

/// A reply, split into the message it answers (if it used the directive with an id the bot was
/// shown) and the text to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Aimed {
    /// The message to answer in its thread.
    pub(super) reply_to: Option<String>,
    /// What to post.
    pub(super) text: String,
}

/// Read the reply directive off `reply`. Only ids in `shown` count; a directive with another id
/// is dropped and the rest goes to the chat. A directive with nothing after it is no reply.
pub(super) fn aim(reply: &str, shown: &[HistoryEntry]) -> Aimed {
    let plain = || Aimed {
        reply_to: None,
        text: reply.trim().to_owned(),
    };
    let Some(rest) = reply.trim_start().strip_prefix(REPLY_DIRECTIVE) else {
        return plain();
    };
    let rest = rest.trim_start();
    let (id, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let id = id.trim_matches(|c| c == '[' || c == ']');
    let known = shown.iter().any(|e| e.message_id == id);
    if !known {
        tracing::warn!(
            id,
            "a scheduled reply aimed at a message it was not shown; posting it to the chat"
        );
    }
    Aimed {
        reply_to: known.then(|| id.to_owned()),
        text: text.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, who: &str, text: &str) -> HistoryEntry {
        HistoryEntry {
            message_id: id.into(),
            sender_id: who.into(),
            speaker: who.into(),
            text: text.into(),
            ts_ms: 0,
        }
    }

    #[test]
    fn history_lines_carry_their_ids() {
        let text = history_section(
            "local:ops",
            &[entry("m7", "ana", "is CI red?"), entry("m8", "bo", "yes")],
        );
        assert!(text.contains("in local:ops"), "{text}");
        assert!(
            text.contains("[m7] ana: is CI red?\n[m8] bo: yes\n"),
            "{text}"
        );
        assert!(text.contains("`>> m7 ...`"), "{text}");
    }

    #[test]
    fn the_directive_aims_at_a_shown_message() {
        let shown = [entry("m7", "ana", "is CI red?")];
        assert_eq!(
            aim(">> m7 Yes, since 10:02.", &shown),
            Aimed {
                reply_to: Some("m7".into()),
                text: "Yes, since 10:02.".into()
            }
        );
        assert_eq!(aim(" >>[m7]  ok ", &shown).reply_to.as_deref(), Some("m7"));
        assert_eq!(
            aim(">> m9 hello", &shown),
            Aimed {
                reply_to: None,
                text: "hello".into()
            },
            "an id it was not shown goes to the chat"
        );
        assert_eq!(
            aim("No directive >> m7 here", &shown),
            Aimed {
                reply_to: None,
                text: "No directive >> m7 here".into()
            }
        );
        assert_eq!(aim(">> m7", &shown).text, "");
    }
}
