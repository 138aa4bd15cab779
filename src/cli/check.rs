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
            "  {:<12} {} model={model}  {}",
            bot.id,
            bot.backend.as_str(),
            bot.description
        );
    }
    let scheduled = config
        .bots
        .iter()
        .any(|b| b.heartbeat.is_some() || !b.cron.is_empty());
    if scheduled {
        let _ = writeln!(out, "Schedules (timezone {}):", config.gateway.timezone);
    }
    for bot in &config.bots {
        if let Some(hb) = &bot.heartbeat {
            let quiet = hb.quiet_hours.as_deref().unwrap_or("none");
            let _ = writeln!(
                out,
                "  {:<12} heartbeat every {} -> {} (quiet hours {quiet})",
                bot.id, hb.every, hb.target
            );
        }
        for (n, entry) in bot.cron.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:<12} cron-{n} \"{}\" -> {}",
                bot.id, entry.schedule, entry.chat
            );
        }
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
        "Chats (default): group_policy={} dm_policy={} activation={} history_limit={}",
        d.group_policy.as_str(),
        d.dm_policy.as_str(),
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
    for model in crate::config::unused_prices(config) {
        let _ = writeln!(
            out,
            "warning: [prices.\"{model}\"] names a model no bot uses, so it never counts; \
             check its spelling against the bots' `model`, or remove it"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_listed_when_there_are_any() {
        let text = "[[bots]]\nid = \"a\"\nbackend = \"echo\"\n";
        let plain = Config::from_toml(text, Path::new("."), &|_| None).unwrap();
        assert!(!summary(&plain).contains("Schedules"));
        let text = format!(
            "{text}heartbeat = {{ every = \"5m\", target = \"ops\" }}\n[[bots.cron]]\nschedule = \"0 9 * * *\"\nchat = \"none\"\nprompt = \"x\"\n"
        );
        let config = Config::from_toml(&text, Path::new("."), &|_| None).unwrap();
        let out = summary(&config);
        assert!(out.contains("Schedules (timezone local):"), "{out}");
        assert!(
            out.contains("heartbeat every 5m -> ops (quiet hours none)"),
            "{out}"
        );
        assert!(out.contains("cron-0 \"0 9 * * *\" -> none"), "{out}");
    }

    #[test]
    fn a_price_no_bot_uses_is_a_warning() {
        let text = "[[bots]]\nid = \"a\"\nbackend = \"echo\"\nmodel = \"m\"\n\n\
                    [prices.\"m\"]\nprompt = 1\n\n[prices.\"mm\"]\nprompt = 1\n";
        let config = Config::from_toml(text, Path::new("."), &|_| None).unwrap();
        let out = summary(&config);
        assert!(
            out.contains("warning: [prices.\"mm\"] names a model no bot uses"),
            "{out}"
        );
        assert!(!out.contains("[prices.\"m\"]"), "{out}");
    }
}
