//! What a bot is given when it takes a turn in a chain: one formatted block with the chain's
//! topic and people, everything said and handed over so far, and what is asked of it now.
//!
//! One block rather than a replay of chat lines, because the chain is not the bot's own
//! conversation: it must see who said what (other bots included) without mistaking their words
//! for its own, and see the whole chain even when it joined late.

use std::fmt::Write as _;

use crate::bot_id::names;
use crate::store::{Chain, ChainEntry, ChainEntryKind};

/// Which part a bot plays in the turn it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// It was handed the turn: it posts once (or passes), then the turn goes back.
    Participant,
    /// The turn came back to it: it hands the turn on or closes the chain.
    Coordinator,
}

impl Role {
    /// For the transcript.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Participant => "participant",
            Role::Coordinator => "coordinator",
        }
    }
}

/// The block for `bot`, in `role`, asked `prompt`.
pub(crate) fn turn_text(
    chain: &Chain,
    log: &[ChainEntry],
    bot: &str,
    role: Role,
    prompt: &str,
    silent_token: &str,
) -> String {
    let mut text = format!(
        "{} coordinator: {}; participants: {}.\n",
        crate::backend::chain_header(&chain.id, &chain.name),
        chain.coordinator_name(),
        if chain.participants.is_empty() {
            "none yet".to_owned()
        } else {
            names(&chain.participants)
        }
    );
    let said: Vec<&ChainEntry> = log.iter().filter(|e| e.turn > 0).collect();
    if said.is_empty() {
        text.push_str("Nothing has been said in the chain yet.\n");
    } else {
        text.push_str("Everything said in the chain so far, oldest first:\n");
        for entry in said {
            let _ = writeln!(text, "{}", line(entry));
        }
    }
    text.push('\n');
    match role {
        Role::Participant => {
            let _ = write!(
                text,
                "It is your turn ({bot}, turn {}). {}\n\nAnswer with your contribution: your \
                 reply is posted to the chat under your name, once, and the turn then goes back \
                 to {}. (With the chain_message tool you may post it yourself: \
                 chain_message(chain=\"{}\", content=...).) Reply {silent_token} to pass.",
                chain.turn,
                prompt.trim(),
                chain.coordinator_name(),
                chain.id,
            );
        }
        Role::Coordinator => {
            let _ = write!(
                text,
                "You coordinate this chain and the turn is yours (turn {}). {}\n\nHand the turn \
                 to one participant at a time with chain_pass(chain=\"{}\", bot, prompt), bring \
                 in another bot with chain_add(chain, bot, prompt), or end the chain with \
                 chain_close(chain) when the topic is done. If you do none of these, the chain \
                 ends here.",
                chain.turn,
                prompt.trim(),
                chain.id,
            );
        }
    }
    text
}

/// One log entry as a line.
fn line(entry: &ChainEntry) -> String {
    match entry.kind {
        ChainEntryKind::Message => format!(
            "- turn {} · {}: {}",
            entry.turn, entry.sender, entry.content
        ),
        ChainEntryKind::Handoff => format!(
            "- turn {} · {} gave the turn to {}: {}",
            entry.turn,
            entry.sender,
            entry.recipient.as_deref().unwrap_or("?"),
            entry.content
        ),
        ChainEntryKind::System => format!("- turn {} · (baton) {}", entry.turn, entry.content),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ChainOrigin, ChainState, Holder};

    fn bot(name: &str) -> crate::bot_id::BotId {
        name.parse().unwrap()
    }

    fn chain() -> Chain {
        Chain {
            id: "ch-abc234".into(),
            name: "launch plan".into(),
            coordinator: Some(bot("snark")),
            holder: Holder::Bot(bot("sec")),
            participants: vec![bot("caid"), bot("sec")],
            state: ChainState::Open,
            turn: 3,
            round: 1,
            origin: ChainOrigin {
                platform: baton_contract::Platform::Local,
                chat: "room".into(),
                thread: None,
                anchor: None,
                account: "snark".into(),
            },
            started_by: "admin".into(),
            closed_reason: None,
            created_ms: 0,
            closed_ms: None,
            trigger: None,
        }
    }

    fn entry(
        turn: i64,
        sender: &str,
        kind: ChainEntryKind,
        content: &str,
        to: Option<&str>,
    ) -> ChainEntry {
        ChainEntry {
            id: turn,
            chain: "ch-abc234".into(),
            turn,
            sender: sender.into(),
            kind,
            content: content.into(),
            recipient: to.map(str::to_owned),
            ts_ms: 0,
        }
    }

    #[test]
    fn the_block_holds_every_earlier_post_in_order_and_the_ask() {
        let log = [
            entry(0, "baton", ChainEntryKind::System, "chain started", None),
            entry(1, "snark", ChainEntryKind::Handoff, "risks?", Some("caid")),
            entry(1, "caid", ChainEntryKind::Message, "the migration", None),
            entry(
                3,
                "snark",
                ChainEntryKind::Handoff,
                "mitigations?",
                Some("sec"),
            ),
        ];
        let text = turn_text(
            &chain(),
            &log,
            "sec",
            Role::Participant,
            "mitigations?",
            "NO_REPLY",
        );
        assert!(
            text.starts_with(
                "[chain ch-abc234 \"launch plan\"] coordinator: snark; participants: caid, sec.\n"
            ),
            "{text}"
        );
        let caid = text
            .find("- turn 1 · caid: the migration")
            .expect("caid's post");
        let handoff = text
            .find("- turn 3 · snark gave the turn to sec: mitigations?")
            .expect("handoff");
        assert!(caid < handoff);
        assert!(
            !text.contains("chain started"),
            "the opening note is not news"
        );
        assert!(text.contains("It is your turn (sec, turn 3). mitigations?"));
        assert!(text.contains("Reply NO_REPLY to pass."));

        let coordinating = turn_text(
            &chain(),
            &[],
            "snark",
            Role::Coordinator,
            "caid posted.",
            "NO_REPLY",
        );
        assert!(coordinating.contains("Nothing has been said in the chain yet."));
        assert!(coordinating.contains("chain_pass(chain=\"ch-abc234\", bot, prompt)"));
    }
}
