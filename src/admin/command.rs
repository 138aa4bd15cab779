//! The `/baton ...` command language: one parser for text commands in any chat and for native
//! slash commands (which arrive with the text after `/baton`).

use crate::budget::LimitKind;
use crate::config::Activation;

/// One admin command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCommand {
    /// List the commands.
    Help,
    /// Bots, accounts and their connections, lanes and queue depths, this chat's settings.
    Status,
    /// The roster.
    Bots,
    /// Set this chat's activation (durable).
    Activation(Activation),
    /// Silence one bot (or every bot) in this chat.
    Pause(Option<String>),
    /// Undo `pause`.
    Resume(Option<String>),
    /// Start a new session for one bot (or every bot) in this chat.
    Reset(Option<String>),
    /// Cancel a bot's running turns in this chat and its threads; nothing of them is posted.
    Stop(String),
    /// Let a DM sender in (`dm_policy = "pairing"`).
    PairingApprove(String),
    /// Approve a bot's pending approval request, with an optional note for the bot.
    Approve {
        /// The request's id (`ap-xxxxxx`).
        id: String,
        /// Why, for the requesting bot.
        note: Option<String>,
    },
    /// Deny a bot's pending approval request, with an optional note for the bot.
    Deny {
        /// The request's id (`ap-xxxxxx`).
        id: String,
        /// Why, for the requesting bot.
        note: Option<String>,
    },
    /// Guard state for this chat: budgets, the bot reply chain, recent refusals.
    Limits,
    /// The spending budgets of this chat and its bots (SPEC 12).
    Budget,
    /// Set a spending budget's limit.
    BudgetSet {
        /// The budget's name.
        name: String,
        /// Which limit.
        kind: LimitKind,
        /// The new value, as typed.
        value: String,
    },
    /// The last lines of this chat's transcript: one bot's session, or everyone's.
    Transcript {
        /// Only this bot's session.
        bot: Option<String>,
        /// How many lines.
        lines: usize,
    },
    /// Start a chain in this chat.
    ChainStart {
        /// The bots taking part, in order.
        participants: Vec<String>,
        /// What it is about.
        topic: String,
    },
    /// A chain's state; without an id, the open chains of this chat.
    ChainStatus(Option<String>),
    /// End a chain at once (`close`, alias `stop`); without an id, every open chain of this
    /// chat. Their running turns are stopped; nothing new starts.
    ChainClose(Option<String>),
}

/// A command line that is not a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not a known command.
    #[error("unknown command `{0}`; try `/baton help`")]
    Unknown(String),
    /// A known command used wrongly.
    #[error("usage: {0}")]
    Usage(&'static str),
}

/// Lines `transcript` prints unless told otherwise.
pub const TRANSCRIPT_LINES: usize = 20;
/// The most lines `transcript` prints.
pub const TRANSCRIPT_MAX_LINES: usize = 200;

/// The help text, one line per command.
pub const HELP: &str = "\
/baton help — this list
/baton status — accounts and connections, lanes and queues, guard refusals in the last hour
/baton bots — the roster
/baton activation mention|always — when bots in this chat answer
/baton pause [@bot] — silence a bot (or all) in this chat
/baton resume [@bot] — undo pause
/baton reset [@bot] — start a new conversation
/baton stop @bot — cancel the bot's running turns in this chat (nothing of them is posted)
/baton pairing approve CODE — let a DM sender in
/baton approve ID [note] — approve a bot's approval request
/baton deny ID [note] — deny a bot's approval request
/baton limits — guard budgets and recent refusals in this chat
/baton budget — spending budgets of this chat and its bots: used, limit, window
/baton budget set NAME tokens|cost_usd VALUE — change a spending budget's limit
/baton transcript [@bot] [n] — the last n lines of this chat's transcript (default 20)
/baton chain start @bot [@bot ...] <topic> — bots take turns on a topic, one at a time
/baton chain status [ID] — the open chains here (or one chain)
/baton chain stop [ID] — end the chains here (or one) at once; alias close";

/// `budget` alone, or `budget set NAME tokens|cost_usd VALUE`.
fn budget<'a>(mut words: impl Iterator<Item = &'a str>) -> Result<AdminCommand, ParseError> {
    const USAGE: &str = "/baton budget [set NAME tokens|cost_usd VALUE]";
    match words.next() {
        None => Ok(AdminCommand::Budget),
        Some("set") => {
            let (Some(name), Some(kind), Some(value), None) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                return Err(ParseError::Usage(USAGE));
            };
            let kind = match kind {
                "tokens" => LimitKind::Tokens,
                "cost_usd" => LimitKind::CostUsd,
                _ => return Err(ParseError::Usage(USAGE)),
            };
            Ok(AdminCommand::BudgetSet {
                name: name.to_owned(),
                kind,
                value: value.to_owned(),
            })
        }
        Some(_) => Err(ParseError::Usage(USAGE)),
    }
}

/// If `text` is a text command (`/baton ...`, possibly after leading @mentions), the part after
/// `/baton`.
pub fn text_command(text: &str) -> Option<&str> {
    let mut rest = text.trim_start();
    while rest.starts_with('@') || rest.starts_with("<@") {
        rest = rest.split_once(char::is_whitespace)?.1.trim_start();
    }
    let after = rest.strip_prefix("/baton")?;
    (after.is_empty() || after.starts_with(char::is_whitespace)).then(|| after.trim())
}

impl AdminCommand {
    /// Parse the words after `/baton`. An empty line is `help`.
    pub fn parse(line: &str) -> Result<AdminCommand, ParseError> {
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else {
            return Ok(AdminCommand::Help);
        };
        let command = match name.to_ascii_lowercase().as_str() {
            "help" => AdminCommand::Help,
            "status" => AdminCommand::Status,
            "bots" => AdminCommand::Bots,
            "activation" => match words.next() {
                Some("mention") => AdminCommand::Activation(Activation::Mention),
                Some("always") => AdminCommand::Activation(Activation::Always),
                _ => return Err(ParseError::Usage("/baton activation mention|always")),
            },
            "pause" => AdminCommand::Pause(bot_arg(words.next(), "/baton pause [@bot]")?),
            "resume" => AdminCommand::Resume(bot_arg(words.next(), "/baton resume [@bot]")?),
            "reset" => AdminCommand::Reset(bot_arg(words.next(), "/baton reset [@bot]")?),
            "stop" => match bot_arg(words.next(), "/baton stop @bot")? {
                Some(bot) => AdminCommand::Stop(bot),
                None => return Err(ParseError::Usage("/baton stop @bot")),
            },
            "pairing" => match (words.next(), words.next()) {
                (Some("approve"), Some(code)) => AdminCommand::PairingApprove(code.to_owned()),
                _ => return Err(ParseError::Usage("/baton pairing approve CODE")),
            },
            "approve" => {
                let Some((id, note)) = id_and_note(words) else {
                    return Err(ParseError::Usage("/baton approve ID [note]"));
                };
                AdminCommand::Approve { id, note }
            }
            "deny" => {
                let Some((id, note)) = id_and_note(words) else {
                    return Err(ParseError::Usage("/baton deny ID [note]"));
                };
                AdminCommand::Deny { id, note }
            }
            "limits" => AdminCommand::Limits,
            "budget" => budget(words)?,
            "transcript" => transcript(words)?,
            "chain" => chain(words)?,
            other => return Err(ParseError::Unknown(other.to_owned())),
        };
        Ok(command)
    }
}

/// An optional bot name (`@` optional). A bare `@` names no bot, and is a usage error rather
/// than a lookup of the bot called "".
fn bot_arg(word: Option<&str>, usage: &'static str) -> Result<Option<String>, ParseError> {
    match word.map(|w| w.trim_start_matches('@').trim_end_matches(',')) {
        None => Ok(None),
        Some("") => Err(ParseError::Usage(usage)),
        Some(name) => Ok(Some(name.to_owned())),
    }
}

/// `transcript [@bot] [n]`, in either order.
fn transcript<'a>(words: impl Iterator<Item = &'a str>) -> Result<AdminCommand, ParseError> {
    const USAGE: &str = "/baton transcript [@bot] [n]";
    let (mut bot, mut lines) = (None, None);
    for word in words {
        match word.parse::<usize>() {
            Ok(n) if lines.is_none() && (1..=TRANSCRIPT_MAX_LINES).contains(&n) => lines = Some(n),
            Ok(_) => return Err(ParseError::Usage(USAGE)),
            Err(_) if bot.is_none() => bot = bot_arg(Some(word), USAGE)?,
            Err(_) => return Err(ParseError::Usage(USAGE)),
        }
    }
    Ok(AdminCommand::Transcript {
        bot,
        lines: lines.unwrap_or(TRANSCRIPT_LINES),
    })
}

/// `chain start @a @b <topic>`, `chain status [ID]`, `chain close|stop [ID]`.
fn chain<'a>(mut words: impl Iterator<Item = &'a str>) -> Result<AdminCommand, ParseError> {
    const USAGE: &str = "/baton chain start @bot [@bot ...] <topic> | status [ID] | stop [ID]";
    let action = words.next().map(str::to_ascii_lowercase);
    let command = match action.as_deref() {
        Some("start") => {
            let mut participants = Vec::new();
            let mut topic = Vec::new();
            for word in words {
                match word.strip_prefix('@').map(|b| b.trim_end_matches(',')) {
                    Some(bot) if topic.is_empty() && !bot.is_empty() => {
                        participants.push(bot.to_owned());
                    }
                    _ => topic.push(word),
                }
            }
            if participants.is_empty() || topic.is_empty() {
                return Err(ParseError::Usage(
                    "/baton chain start @bot [@bot ...] <topic> (name the bots first, then the topic)",
                ));
            }
            AdminCommand::ChainStart {
                participants,
                topic: topic.join(" "),
            }
        }
        Some("status") => AdminCommand::ChainStatus(words.next().map(str::to_owned)),
        Some("close" | "stop") => AdminCommand::ChainClose(words.next().map(str::to_owned)),
        _ => return Err(ParseError::Usage(USAGE)),
    };
    Ok(command)
}

/// Whether a human's message asks to stop the chains of its chat anywhere in it (`... /baton
/// chain stop ...`): the emergency brake works even when the command is not the whole message.
pub fn asks_chain_stop(text: &str) -> bool {
    // Every human message passes here: one without a `/` is passed over by a byte search, and
    // in the others the words are compared in place, not copied (splitting the words of every
    // line of chatter was 1.7% of the pipeline's instructions, BENCHMARKS.md).
    if !text.contains('/') {
        return false;
    }
    let mut words = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| c == '`' || c == '"'));
    let (mut second_last, mut last) = ("", "");
    words.any(|word| {
        let asks = second_last.eq_ignore_ascii_case("/baton")
            && last.eq_ignore_ascii_case("chain")
            && (word.eq_ignore_ascii_case("stop") || word.eq_ignore_ascii_case("close"));
        (second_last, last) = (last, word);
        asks
    })
}

/// `ID [note...]`: the first word, and the rest (if any) as one note.
fn id_and_note<'a>(mut words: impl Iterator<Item = &'a str>) -> Option<(String, Option<String>)> {
    let id = words.next()?.to_owned();
    let note = words.collect::<Vec<_>>().join(" ");
    Some((id, (!note.is_empty()).then_some(note)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_text_commands_after_mentions_only() {
        assert_eq!(text_command("/baton status"), Some("status"));
        assert_eq!(
            text_command("@snark /baton pause @caid"),
            Some("pause @caid")
        );
        assert_eq!(text_command("/baton"), Some(""));
        assert_eq!(text_command("/batonx"), None);
        assert_eq!(text_command("please /baton help"), None);
    }

    #[test]
    fn parses_every_command_and_reports_misuse() {
        assert_eq!(AdminCommand::parse(""), Ok(AdminCommand::Help));
        assert_eq!(
            AdminCommand::parse("activation always"),
            Ok(AdminCommand::Activation(Activation::Always))
        );
        assert_eq!(
            AdminCommand::parse("pause @caid"),
            Ok(AdminCommand::Pause(Some("caid".into())))
        );
        assert_eq!(
            AdminCommand::parse("stop @caid"),
            Ok(AdminCommand::Stop("caid".into()))
        );
        assert_eq!(
            AdminCommand::parse("stop"),
            Err(ParseError::Usage("/baton stop @bot"))
        );
        assert_eq!(AdminCommand::parse("reset"), Ok(AdminCommand::Reset(None)));
        assert_eq!(
            AdminCommand::parse("pairing approve AB12CD"),
            Ok(AdminCommand::PairingApprove("AB12CD".into()))
        );
        assert_eq!(
            AdminCommand::parse("approve ap-7kq2xd"),
            Ok(AdminCommand::Approve {
                id: "ap-7kq2xd".into(),
                note: None
            })
        );
        assert_eq!(
            AdminCommand::parse("DENY ap-7kq2xd  not   on a Friday"),
            Ok(AdminCommand::Deny {
                id: "ap-7kq2xd".into(),
                note: Some("not on a Friday".into())
            })
        );
        assert!(matches!(
            AdminCommand::parse("approve"),
            Err(ParseError::Usage(_))
        ));
        assert!(matches!(
            AdminCommand::parse("activation sometimes"),
            Err(ParseError::Usage(_))
        ));
        assert_eq!(
            AdminCommand::parse("launch"),
            Err(ParseError::Unknown("launch".into()))
        );
    }

    #[test]
    fn parses_limits_transcript_and_chain_commands() {
        assert_eq!(AdminCommand::parse("limits"), Ok(AdminCommand::Limits));
        assert_eq!(AdminCommand::parse("budget"), Ok(AdminCommand::Budget));
        assert_eq!(
            AdminCommand::parse("budget set caid-daily tokens 300000"),
            Ok(AdminCommand::BudgetSet {
                name: "caid-daily".into(),
                kind: LimitKind::Tokens,
                value: "300000".into(),
            })
        );
        assert!(matches!(
            AdminCommand::parse("budget set caid-daily dollars 3"),
            Err(ParseError::Usage(_))
        ));
        assert_eq!(
            AdminCommand::parse("transcript"),
            Ok(AdminCommand::Transcript {
                bot: None,
                lines: TRANSCRIPT_LINES
            })
        );
        assert_eq!(
            AdminCommand::parse("transcript 5 @caid"),
            Ok(AdminCommand::Transcript {
                bot: Some("caid".into()),
                lines: 5
            })
        );
        assert!(matches!(
            AdminCommand::parse("transcript 0"),
            Err(ParseError::Usage(_))
        ));
        assert!(matches!(
            AdminCommand::parse("transcript a b"),
            Err(ParseError::Usage(_))
        ));
        assert_eq!(
            AdminCommand::parse("chain start @caid @sec, @doc review the launch plan"),
            Ok(AdminCommand::ChainStart {
                participants: vec!["caid".into(), "sec".into(), "doc".into()],
                topic: "review the launch plan".into()
            })
        );
        assert!(matches!(
            AdminCommand::parse("chain start @caid"),
            Err(ParseError::Usage(_))
        ));
        assert!(matches!(
            AdminCommand::parse("chain start the plan"),
            Err(ParseError::Usage(_))
        ));
        assert_eq!(
            AdminCommand::parse("chain status"),
            Ok(AdminCommand::ChainStatus(None))
        );
        assert_eq!(
            AdminCommand::parse("chain STOP ch-abc234"),
            Ok(AdminCommand::ChainClose(Some("ch-abc234".into())))
        );
        assert_eq!(
            AdminCommand::parse("chain close"),
            Ok(AdminCommand::ChainClose(None))
        );
        assert!(matches!(
            AdminCommand::parse("chain"),
            Err(ParseError::Usage(_))
        ));
    }

    #[test]
    fn a_bare_at_names_no_bot_and_is_refused() {
        for line in ["pause @", "resume @,", "reset @", "transcript @ 5"] {
            let parsed = AdminCommand::parse(line);
            assert!(
                matches!(parsed, Err(ParseError::Usage(_))),
                "{line}: {parsed:?}"
            );
        }
        assert!(matches!(
            AdminCommand::parse("chain start @, topic"),
            Err(ParseError::Usage(_))
        ));
    }

    #[test]
    fn a_stop_anywhere_in_a_message_is_the_brake() {
        assert!(asks_chain_stop("ok that's enough /baton chain stop please"));
        assert!(asks_chain_stop("`/baton chain close`"));
        assert!(asks_chain_stop("/BATON Chain STOP"));
        assert!(!asks_chain_stop("/baton chain"));
        assert!(!asks_chain_stop("/baton chain status"));
        assert!(!asks_chain_stop("stop the chain"));
    }
}
