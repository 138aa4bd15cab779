//! `baton setup PLATFORM BOT`: what a platform needs for one bot's account, ready to paste (a
//! Slack app manifest, a Discord install URL, Feishu/Lark's scopes, Telegram's @BotFather
//! settings). The manifest or URL goes to
//! stdout, the guidance around it to stderr, so `baton setup slack snark > manifest.yaml` keeps
//! only what the platform reads. One file per platform; each also says what its account needs,
//! which `baton doctor` checks against what the platform granted.

pub(super) mod discord;
pub(super) mod feishu;
pub(super) mod slack;
#[cfg(feature = "telegram")]
mod telegram;
mod yaml;

use std::path::Path;

use clap::{Args, ValueEnum};
use serde_json::Value;

use crate::config::{AccountConfig, BotConfig, Config};
use baton_contract::Platform;

/// Which platform, which bot, which form.
#[derive(Debug, Args)]
pub(super) struct SetupArgs {
    /// The platform to set the bot up on.
    #[arg(value_enum)]
    platform: SetupPlatform,
    /// The bot's id (`[[bots]] id`).
    bot: String,
    /// Print the manifest (or the install URL's parts) as YAML or JSON; default: each
    /// platform's own form (Slack YAML, the Discord URL, Feishu/Lark's bulk-import JSON).
    #[arg(long, value_enum)]
    format: Option<Format>,
}

/// The platforms `baton setup` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SetupPlatform {
    Slack,
    Discord,
    Feishu,
    Lark,
    #[cfg(feature = "telegram")]
    Telegram,
}

impl SetupPlatform {
    fn platform(self) -> Platform {
        match self {
            SetupPlatform::Slack => Platform::Slack,
            SetupPlatform::Discord => Platform::Discord,
            SetupPlatform::Feishu => Platform::Feishu,
            SetupPlatform::Lark => Platform::Lark,
            #[cfg(feature = "telegram")]
            SetupPlatform::Telegram => Platform::Telegram,
        }
    }
}

/// How the manifest is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Format {
    Yaml,
    Json,
}

/// What one platform's setup prints: the part to paste (stdout) and the steps around it
/// (stderr).
pub(super) struct Printout {
    /// The manifest, or the URL's parts, as structured data.
    pub(super) document: Value,
    /// The document's own form when no `--format` is given.
    pub(super) plain: Plain,
    /// What to do with it, line by line.
    pub(super) guidance: Vec<String>,
}

/// How a platform's document is printed by default.
pub(super) enum Plain {
    /// As YAML (Slack's manifest editor takes it).
    Yaml,
    /// As JSON (Feishu/Lark's bulk import takes it).
    Json,
    /// One line of text (Discord's install URL).
    Line(String),
}

/// Runs `baton setup`.
pub(super) fn setup(path: &Path, args: SetupArgs) -> anyhow::Result<()> {
    let config = super::load(path)?;
    let platform = args.platform.platform();
    let (bot, account) = account_for(&config, &args.bot, platform)?;
    let printout = match platform {
        Platform::Slack => slack::printout(&config, bot, account),
        Platform::Discord => discord::printout(bot, account)?,
        #[cfg(feature = "telegram")]
        Platform::Telegram => telegram::printout(&config, bot, account),
        _ => feishu::printout(&config, bot, account),
    };
    for line in &printout.guidance {
        eprintln!("{line}");
    }
    let text = match (args.format, printout.plain) {
        (Some(Format::Json), _) | (None, Plain::Json) => {
            serde_json::to_string_pretty(&printout.document)?
        }
        (Some(Format::Yaml), _) | (None, Plain::Yaml) => yaml::to_yaml(&printout.document),
        (None, Plain::Line(line)) => line,
    };
    println!("{}", text.trim_end());
    Ok(())
}

/// The bot `id` and its account on `platform`, or an error naming what there is instead.
pub(super) fn account_for<'c>(
    config: &'c Config,
    id: &str,
    platform: Platform,
) -> anyhow::Result<(&'c BotConfig, &'c AccountConfig)> {
    let Some(bot) = config.bots.iter().find(|b| b.id == id) else {
        let known: Vec<&str> = config.bots.iter().map(|b| b.id.as_str()).collect();
        anyhow::bail!(
            "no bot `{id}` in the config; the bots are: {}",
            if known.is_empty() {
                "(none)".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    let mine: Vec<&AccountConfig> = config.accounts.iter().filter(|a| a.bot == id).collect();
    match mine.iter().find(|a| a.platform == platform) {
        Some(account) => Ok((bot, account)),
        None => {
            let listed: Vec<String> = mine
                .iter()
                .map(|a| format!("{}/{}", a.platform, a.account_id()))
                .collect();
            anyhow::bail!(
                "bot `{id}` has no {platform} account; add an [[accounts]] entry with bot = \"{id}\" \
                 and platform = \"{platform}\" (its accounts: {})",
                if listed.is_empty() {
                    "none".to_owned()
                } else {
                    listed.join(", ")
                }
            )
        }
    }
}
