//! Heartbeats and cron entries (`bots[i].heartbeat`, `[[bots.cron]]`) and the clock they read,
//! `gateway.timezone`: every value parses, every file is readable, and every target chat is on
//! a platform the bot has an account on.

use baton_contract::Platform;

use super::super::Config;
use super::super::default_platform;
use super::Checker;
use crate::timing::{Place, QuietHours, Schedule, Zone, parse_every};

impl Checker<'_> {
    pub(super) fn schedules(&mut self, config: &Config) {
        if let Err(why) = Zone::parse(&config.gateway.timezone) {
            self.report("gateway.timezone", why);
        }
        for (i, bot) in config.bots.iter().enumerate() {
            if let Some(hb) = &bot.heartbeat {
                let key = |name: &str| format!("bots[{i}].heartbeat.{name}");
                if let Err(why) = parse_every(&hb.every) {
                    self.report(key("every"), why);
                }
                if let Some(window) = &hb.quiet_hours
                    && let Err(why) = QuietHours::parse(window)
                {
                    self.report(key("quiet_hours"), why);
                }
                self.place(config, &bot.id, &key("target"), &hb.target);
                if let Some(file) = &hb.prompt_file {
                    let path = config.base_dir.join(file);
                    if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                        self.report(
                            key("prompt_file"),
                            format!(
                                "cannot read `{}`; create it (a checklist, one item a line) or \
                                 remove prompt_file to use the built-in heartbeat prompt; \
                                 relative paths are resolved from the config file's directory",
                                path.display()
                            ),
                        );
                    }
                }
            }
            for (n, entry) in bot.cron.iter().enumerate() {
                let key = |name: &str| format!("bots[{i}].cron[{n}].{name}");
                if let Err(why) = Schedule::parse(&entry.schedule) {
                    self.report(key("schedule"), why);
                }
                self.place(config, &bot.id, &key("chat"), &entry.chat);
                if entry.prompt.trim().is_empty() {
                    self.report(key("prompt"), "is empty; write what the bot should do then");
                }
            }
        }
    }

    /// A heartbeat target or cron chat: `none`, or a chat on a platform `bot` can speak on.
    fn place(&mut self, config: &Config, bot: &str, key: &str, text: &str) {
        match Place::parse(text, default_platform(config, bot)) {
            Err(why) => self.report(key, why),
            Ok(Place::Chat { platform, .. })
                if platform != Platform::Local
                    && !config
                        .accounts
                        .iter()
                        .any(|a| a.bot == bot && a.platform == platform) =>
            {
                self.report(
                    key,
                    format!(
                        "`{text}` is a {platform} chat, but bot `{bot}` has no {platform} \
                         account; add one under [[accounts]], or aim at a chat it can post in"
                    ),
                );
            }
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{keys, no_env, parse};
    use super::super::validate;

    #[test]
    fn every_schedule_problem_names_its_key() {
        let text = r#"
[gateway]
timezone = "Europe/Parris"

[[accounts]]
bot = "snark"
platform = "slack"
bot_token_env = "T"
app_token_env = "A"

[[bots]]
id = "snark"
backend = "echo"
heartbeat = { every = "30", target = "discord:123", prompt_file = "missing.md", quiet_hours = "22-07" }

[[bots.cron]]
schedule = "0 9 * *"
chat = "slack:"
prompt = " "

[[bots.cron]]
schedule = "0 9 * * 1-5"
chat = "C0123"
prompt = "Post the standup reminder."
"#;
        let problems = validate(&parse(text), &no_env);
        let keys = keys(&problems);
        for key in [
            "gateway.timezone",
            "bots[0].heartbeat.every",
            "bots[0].heartbeat.target",
            "bots[0].heartbeat.prompt_file",
            "bots[0].heartbeat.quiet_hours",
            "bots[0].cron[0].schedule",
            "bots[0].cron[0].chat",
            "bots[0].cron[0].prompt",
        ] {
            assert!(keys.contains(&key), "missing {key} in {problems:#?}");
        }
        assert!(
            !keys.iter().any(|k| k.starts_with("bots[0].cron[1]")),
            "a plain chat id is on the first account's platform: {problems:#?}"
        );
    }

    #[test]
    fn defaults_and_local_targets_are_fine() {
        let text = r#"
[[bots]]
id = "snark"
backend = "echo"
heartbeat = {}

[[bots]]
id = "caid"
backend = "echo"
heartbeat = { every = "1h30m", target = "ops", quiet_hours = "22:00-07:00" }
"#;
        let problems = validate(&parse(text), &no_env);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
