//! The `/baton ...` command language: one parser for text commands in any chat and for native
//! slash commands (which arrive with the text after `/baton`).

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

/// The help text, one line per command.
pub const HELP: &str = "\
/baton help — this list
/baton status — bots, accounts, connections, lanes and queues, this chat's settings
/baton bots — the roster
/baton activation mention|always — when bots in this chat answer
/baton pause [@bot] — silence a bot (or all) in this chat
/baton resume [@bot] — undo pause
/baton reset [@bot] — start a new conversation
/baton pairing approve CODE — let a DM sender in
/baton approve ID [note] — approve a bot's approval request
/baton deny ID [note] — deny a bot's approval request";

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
        let bot = |w: Option<&str>| w.map(|b| b.trim_start_matches('@').to_owned());
        let command = match name.to_ascii_lowercase().as_str() {
            "help" => AdminCommand::Help,
            "status" => AdminCommand::Status,
            "bots" => AdminCommand::Bots,
            "activation" => match words.next() {
                Some("mention") => AdminCommand::Activation(Activation::Mention),
                Some("always") => AdminCommand::Activation(Activation::Always),
                _ => return Err(ParseError::Usage("/baton activation mention|always")),
            },
            "pause" => AdminCommand::Pause(bot(words.next())),
            "resume" => AdminCommand::Resume(bot(words.next())),
            "reset" => AdminCommand::Reset(bot(words.next())),
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
            other => return Err(ParseError::Unknown(other.to_owned())),
        };
        Ok(command)
    }
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
}
