//! Admin commands: `/baton help`, `status`, `bots`, `activation`, `pause`,
//! `resume`, `reset`, `limits`, `budget [set]`, `transcript`, `chain start|status|close`, `pairing approve`,
//! `approve`, `deny`. One parser ([`AdminCommand::parse`]) and one handler set serve text
//! commands in any chat and native slash commands alike; authorization and auditing happen in
//! the pipeline's admin step. The chain commands are in `chain.rs`, the reports (`status`,
//! `limits`, `transcript`, `bots`) in `report.rs`.

mod budget;
mod chain;
mod command;
mod error;
mod handle;
mod report;

use baton_contract::{ChatKey, InboundEvent, Platform};

pub(crate) use chain::may_stop;
pub use command::{
    AdminCommand, HELP, ParseError, TRANSCRIPT_LINES, TRANSCRIPT_MAX_LINES, asks_chain_stop,
    text_command,
};
pub(crate) use error::AdminError;
pub(crate) use handle::Admin;

use crate::bot_id::BotId;
use crate::chains::Chains;
use crate::config::Activation;
use crate::engine::Engine;
use crate::escalation::{Decision, Resolver, decide_approval};
use crate::roster::Account;
use crate::store::{Chain, PairingApproval};
use crate::timing::now_ms;

/// Where, how and by whom a command was given: what the commands read of the event that
/// carried it, and of the chat it came from.
pub(crate) struct Invocation<'a> {
    /// The event carrying the command.
    pub event: &'a InboundEvent,
    /// The account that received it.
    pub account: &'a Account,
    /// The sender's display name.
    pub speaker_name: &'a str,
    /// `<platform>:<chat>`: durable chat settings.
    pub settings_key: &'a ChatKey,
    /// The chat's configured activation (before `/baton activation`).
    pub activation: Activation,
    /// How many bot messages in a row the chat has now (the pipeline's bot guard).
    pub bot_chain: u32,
}

/// What a command answers, and what happens once the answer is posted.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The answer.
    pub text: String,
    /// Work that must follow the answer, not precede it.
    pub then: Option<AfterAnswer>,
}

/// Work done after an answer is posted, so the chat reads in order.
#[derive(Debug)]
pub(crate) enum AfterAnswer {
    /// Give a started chain its first turn, with this prompt for its coordinator.
    KickOff(Chain, String),
}

impl From<String> for Answer {
    fn from(text: String) -> Answer {
        Answer { text, then: None }
    }
}

/// Do what an answer left to do.
pub(crate) async fn after(chains: &Chains, then: AfterAnswer) {
    match then {
        AfterAnswer::KickOff(chain, prompt) => crate::chains::kick_off(chains, chain, prompt).await,
    }
}

/// Run an authorized command in the chat `inbound` came from. The error's text is the answer.
pub(crate) async fn execute(
    admin: &Admin,
    inbound: &Invocation<'_>,
    command: &AdminCommand,
) -> Result<Answer, AdminError> {
    let engine = admin.engine();
    let store = engine.store();
    let chat = inbound.settings_key;
    let answer = match command {
        AdminCommand::ChainStart {
            participants,
            topic,
        } => return chain::start(engine, inbound, participants, topic).await,
        AdminCommand::ChainStatus(id) => chain::status(engine, inbound, id.as_deref()).await,
        AdminCommand::ChainClose(id) => chain::close(engine, inbound, id.as_deref()).await,
        AdminCommand::Help => Ok(HELP.to_owned()),
        AdminCommand::Status => Ok(report::status(engine, admin.schedule()).await),
        AdminCommand::Bots => Ok(report::bots(engine)),
        AdminCommand::Limits => Ok(report::limits(engine, inbound).await),
        AdminCommand::Budget => budget::show(engine, inbound).await,
        AdminCommand::BudgetSet { name, kind, value } => {
            budget::set(engine, name, *kind, value).await
        }
        AdminCommand::Transcript { bot, lines } => {
            report::transcript(engine, inbound, bot.as_deref(), *lines).await
        }
        AdminCommand::Activation(activation) => {
            store.set_activation(chat, Some(*activation)).await?;
            Ok(format!(
                "Activation in this chat is now `{}`.",
                activation.as_str()
            ))
        }
        AdminCommand::Pause(bot) => {
            let whom = whom(engine, inbound, bot.as_deref())?;
            store.set_paused(chat, whom.stored(), true).await?;
            Ok(format!("Paused {whom} in this chat."))
        }
        AdminCommand::Resume(bot) => {
            let whom = whom(engine, inbound, bot.as_deref())?;
            match &whom {
                Whom::Every => store.set_paused(chat, "*", false).await?,
                Whom::Bot(bot) => {
                    let others = others_here(engine, inbound.event.platform, bot);
                    store.resume_alone(chat, bot.as_str(), others).await?;
                }
            }
            Ok(format!("Resumed {whom} in this chat."))
        }
        AdminCommand::Stop(bot) => {
            let bot = resolve_bot(engine, inbound, bot)?;
            let event = &inbound.event;
            let n = engine.running().stop(&bot, event.platform, &event.chat);
            Ok(match n {
                0 => format!("{bot} has no turn running in this chat."),
                n => format!("Stopped {n} running turn(s) of {bot} in this chat."),
            })
        }
        AdminCommand::Reset(bot) => {
            let whom = whom(engine, inbound, bot.as_deref())?;
            let only = match &whom {
                Whom::Bot(bot) => Some(bot),
                Whom::Every => None,
            };
            let event = &inbound.event;
            let n = store
                .reset_sessions(event.platform.as_str(), event.chat.as_str(), only)
                .await?;
            Ok(format!(
                "Started a new conversation for {whom} ({n} session(s))."
            ))
        }
        AdminCommand::PairingApprove(code) => {
            let approved = store.approve_pairing(code, now_ms()).await?;
            pairing_answer(code, approved)
        }
        AdminCommand::Approve { id, note } => {
            decide(engine, inbound, id, Decision::Approve, note.as_deref()).await
        }
        AdminCommand::Deny { id, note } => {
            decide(engine, inbound, id, Decision::Deny, note.as_deref()).await
        }
    };
    answer.map(Answer::from)
}

/// What `pairing approve CODE` answers, for `/baton` and the CLI alike.
pub(crate) fn pairing_answer(code: &str, approved: PairingApproval) -> Result<String, AdminError> {
    let code = code.trim();
    match approved {
        PairingApproval::Approved { platform, user } => Ok(format!(
            "Approved {user} on {platform}: they can talk to the bots in DMs now."
        )),
        PairingApproval::Expired { platform, user } => Err(AdminError::PairingExpired {
            code: code.to_owned(),
            user,
            platform,
        }),
        PairingApproval::Unknown => Err(AdminError::PairingUnknown(code.to_owned())),
    }
}

/// `approve` / `deny`: decide a bot's approval request as the admin who ran the command.
async fn decide(
    engine: &Engine,
    inbound: &Invocation<'_>,
    id: &str,
    decision: Decision,
    note: Option<&str>,
) -> Result<String, AdminError> {
    let by = Resolver::Human {
        id: inbound.event.sender.id.as_str(),
        name: inbound.speaker_name,
    };
    let decided = decide_approval(engine, id, decision, by, note)
        .await
        .map_err(|err| AdminError::of_decision(id, err))?;
    Ok(match decision {
        Decision::Approve => format!("Approved {}.", decided.id),
        Decision::Deny => format!("Denied {}.", decided.id),
    })
}

/// The bots other than `bot` that speak on `platform`: those a pause of every bot holds in a
/// chat there.
fn others_here(engine: &Engine, platform: Platform, bot: &BotId) -> Vec<String> {
    let roster = engine.roster();
    roster
        .bots()
        .iter()
        .map(|b| b.id())
        .filter(|id| *id != bot && roster.account_of_bot(platform, id).is_some())
        .map(|id| id.to_string())
        .collect()
}

/// Who a pause, resume or reset is about: the bot named, or every bot when none is.
enum Whom {
    /// Every bot in the chat (stored as `*` in the paused list).
    Every,
    /// One bot.
    Bot(BotId),
}

impl Whom {
    /// As the chat's paused list stores it.
    fn stored(&self) -> &str {
        match self {
            Whom::Every => "*",
            Whom::Bot(bot) => bot.as_str(),
        }
    }
}

impl std::fmt::Display for Whom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Whom::Every => f.write_str("every bot"),
            Whom::Bot(bot) => write!(f, "`{bot}`"),
        }
    }
}

/// The bot `name` resolves to ([`resolve_bot`]), or every bot without a name.
fn whom(engine: &Engine, inbound: &Invocation<'_>, name: Option<&str>) -> Result<Whom, AdminError> {
    Ok(match name {
        Some(name) => Whom::Bot(resolve_bot(engine, inbound, name)?),
        None => Whom::Every,
    })
}

/// A bot named by id, display name, or its account's user id on this platform (`@` optional,
/// as a mention arrives).
pub(crate) fn resolve_bot(
    engine: &Engine,
    inbound: &Invocation<'_>,
    name: &str,
) -> Result<BotId, AdminError> {
    let name = name.trim_start_matches('@');
    let roster = engine.roster();
    roster
        .bots()
        .iter()
        .find(|b| b.id() == name || b.config.display_name().eq_ignore_ascii_case(name))
        .or_else(|| roster.bot_of_user(inbound.event.platform, &name.into()))
        .map(|b| b.id().clone())
        .ok_or_else(|| AdminError::UnknownBot(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use baton_contract::{AccountId, ChatId, ChatKind, MessageId, Platform, Sender};

    use super::*;
    use crate::config::Activation;
    use crate::gateway::testing::{Parts, echo_config, parts};

    /// Bots `alpha` (named "Snark") and `beta`, each on its local account.
    async fn gateway() -> Parts {
        let config = echo_config(&["beta", "alpha"], "name = \"Snark\"\n");
        parts(&config).await
    }

    /// A command `root` typed in the local chat `room`, to `alpha`'s account.
    struct Typed {
        event: InboundEvent,
        settings_key: ChatKey,
    }

    impl Typed {
        /// `/baton <line>`.
        fn new(line: &str) -> Typed {
            let sender = Sender {
                id: "root".into(),
                name: "Root".into(),
                is_bot: false,
                is_self: false,
            };
            let event = InboundEvent::text_message(
                Platform::Local,
                AccountId::from("alpha"),
                ChatId::from("room"),
                ChatKind::Group,
                sender,
                MessageId::from("m1"),
                format!("/baton {line}"),
            );
            let settings_key = ChatKey::new(Platform::Local, &event.chat, None);
            Typed {
                event,
                settings_key,
            }
        }

        /// As the commands read it, received by `alpha`'s account of `gw`.
        fn invocation<'a>(&'a self, gw: &'a Parts) -> Invocation<'a> {
            let account = gw
                .engine
                .roster()
                .account(Platform::Local, &self.event.account);
            Invocation {
                event: &self.event,
                account: account.expect("alpha's account"),
                speaker_name: "Root",
                settings_key: &self.settings_key,
                activation: Activation::Mention,
                bot_chain: 0,
            }
        }
    }

    /// `line` (the words after `/baton`), run as `root` in `room`: its answer, or the error
    /// whose text is the answer.
    async fn run(gw: &Parts, line: &str) -> Result<String, AdminError> {
        let typed = Typed::new(line);
        let command = AdminCommand::parse(line).expect("a command");
        let answer = execute(gw.dispatcher.admin(), &typed.invocation(gw), &command).await;
        answer.map(|a| a.text)
    }

    /// `room`'s settings as the store keeps them.
    async fn settings(gw: &Parts) -> crate::store::ChatSettings {
        let room = ChatKey::new(Platform::Local, &"room".into(), None);
        gw.engine.store().chat_settings(&room).await.unwrap()
    }

    /// A bot is named by its id or its display name (any case), with or without the `@` a
    /// mention arrives with; a name no bot has is an error naming it.
    #[tokio::test]
    async fn a_bot_is_named_by_id_or_display_name_with_or_without_an_at() {
        let gw = gateway().await;
        let typed = Typed::new("pause");
        let named = |name| resolve_bot(&gw.engine, &typed.invocation(&gw), name);
        for name in ["alpha", "@alpha", "snark", "@SNARK"] {
            assert_eq!(named(name).unwrap().as_str(), "alpha", "{name}");
        }
        let unknown = named("@gamma").unwrap_err();
        assert!(matches!(&unknown, AdminError::UnknownBot(name) if name == "gamma"));
        let answer = run(&gw, "pause @Snark").await.unwrap();
        assert_eq!(answer, "Paused `alpha` in this chat.");
    }

    /// A pause names one bot or, without a name, every bot; resuming every bot lifts every
    /// pause. Resuming one bot while every bot is paused resumes that bot alone: the others
    /// stay paused, a bot paused by name among them.
    #[tokio::test]
    async fn pause_and_resume_name_one_bot_or_every_bot() {
        let gw = gateway().await;
        run(&gw, "pause beta").await.unwrap();
        assert_eq!(
            run(&gw, "pause").await.unwrap(),
            "Paused every bot in this chat."
        );
        assert_eq!(settings(&gw).await.paused, ["*", "beta"]);
        assert_eq!(
            run(&gw, "resume alpha").await.unwrap(),
            "Resumed `alpha` in this chat."
        );
        assert!(!settings(&gw).await.is_paused(&"alpha".parse().unwrap()));
        assert_eq!(settings(&gw).await.paused, ["beta"], "beta stays paused");
        run(&gw, "resume beta").await.unwrap();
        assert!(settings(&gw).await.paused.is_empty());
        run(&gw, "pause alpha").await.unwrap();
        assert_eq!(
            run(&gw, "resume").await.unwrap(),
            "Resumed every bot in this chat."
        );
        assert!(settings(&gw).await.paused.is_empty());
    }

    /// An activation set by command is kept for the chat, over the config's.
    #[tokio::test]
    async fn an_activation_set_by_command_is_kept_for_the_chat() {
        let gw = gateway().await;
        let answer = run(&gw, "activation always").await.unwrap();
        assert_eq!(answer, "Activation in this chat is now `always`.");
        assert_eq!(settings(&gw).await.activation, Some(Activation::Always));
    }

    /// Stopping a bot with no turn running in the chat says so.
    #[tokio::test]
    async fn stopping_a_bot_with_nothing_running_says_so() {
        let gw = gateway().await;
        let answer = run(&gw, "stop snark").await.unwrap();
        assert_eq!(answer, "alpha has no turn running in this chat.");
    }

    /// A pairing code is approved, past its hour, or unknown, each answered with what to do.
    #[test]
    fn a_pairing_code_is_answered_approved_expired_or_unknown() {
        let who = || ("slack".to_owned(), "U1".to_owned());
        let (platform, user) = who();
        let approved = pairing_answer(" K7 ", PairingApproval::Approved { platform, user });
        assert_eq!(
            approved.unwrap(),
            "Approved U1 on slack: they can talk to the bots in DMs now."
        );
        let (platform, user) = who();
        let expired = pairing_answer(" K7 ", PairingApproval::Expired { platform, user });
        assert!(matches!(
            expired,
            Err(AdminError::PairingExpired { code, .. }) if code == "K7"
        ));
        let unknown = pairing_answer("K8", PairingApproval::Unknown).unwrap_err();
        assert!(
            unknown
                .to_string()
                .starts_with("No pending pairing with code K8")
        );
    }
}
