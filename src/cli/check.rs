//! `baton check`: validate the config and print what it would run.

use std::path::Path;

use crate::config::Config;

pub(super) fn check(path: &Path) -> anyhow::Result<()> {
    let config = super::load(path)?;
    print!("{}", summary(&config));
    println!("config OK: {}", path.display());
    Ok(())
}

/// The roster, accounts and chat policies, as `baton check` prints them.
fn summary(config: &Config) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("Bots:\n");
    for bot in &config.bots {
        let model = bot.model.as_deref().unwrap_or("-");
        let _ = writeln!(
            out,
            "  {:<12} {:?} model={model}  {}",
            bot.id, bot.backend, bot.description
        );
    }
    out.push_str("Accounts:\n");
    for account in &config.accounts {
        let _ = writeln!(
            out,
            "  {}/{} -> bot {}",
            account.platform,
            account.account_id(),
            account.bot
        );
    }
    let d = &config.chats_default;
    let _ = writeln!(
        out,
        "Chats (default): group_policy={:?} dm_policy={:?} activation={} history_limit={}",
        d.group_policy,
        d.dm_policy,
        d.activation.as_str(),
        d.history_limit
    );
    for chat in &config.chats {
        let activation = chat.activation.unwrap_or(d.activation);
        let _ = writeln!(
            out,
            "  {}:{} activation={} allow_bots={:?}",
            chat.platform,
            chat.id,
            activation.as_str(),
            chat.allow_bots.as_deref().unwrap_or(&d.allow_bots)
        );
    }
    out
}
