//! The gateway-wide sections: `[gateway]`, `[lanes]`, `[local]`, `[limits]`, `[agent_to_agent]`
//! and `[chains]`. Mostly numbers that must leave room for work (a lane of 0 never runs a turn, a
//! budget of 0 refuses everything), plus the bots the sections name.

use std::net::SocketAddr;

use super::super::Config;
use super::Checker;

/// Below this an ordinary MCP client's `initialize` does not fit.
const MIN_MCP_INIT_BYTES: usize = 1024;

impl Checker<'_> {
    /// `gateway.database_url_env`: a set variable holding a URL the PostgreSQL driver reads.
    /// The URL holds a password, so no message repeats it.
    fn database_url(&mut self, name: &str) {
        const HOLDS: &str = "the PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DATABASE), \
                             or remove the key to keep the SQLite file of `gateway.database`";
        self.env_var("gateway.database_url_env", name, HOLDS);
        if let Some(url) = (self.env)(name).filter(|url| !url.is_empty())
            && let Err(why) = crate::store::PgUrl::parse(&url)
        {
            self.report(
                "gateway.database_url_env",
                format!("environment variable `{name}` {why}"),
            );
        }
    }

    pub(super) fn gateway(&mut self, config: &Config) {
        let gateway = &config.gateway;
        if gateway.listen.parse::<SocketAddr>().is_err() {
            self.report(
                "gateway.listen",
                format!(
                    "`{}` is not a socket address; write IP:PORT, e.g. \"127.0.0.1:8642\" \
                     (or \"0.0.0.0:8642\" to listen on every interface)",
                    gateway.listen
                ),
            );
        }
        if gateway.database.trim().is_empty() {
            self.report(
                "gateway.database",
                "is empty; name an SQLite file (e.g. \"baton.db\"), or \":memory:\" for a \
                 throwaway run",
            );
        }
        if let Some(name) = &gateway.database_url_env {
            self.database_url(name);
        }
        if let Some(name) = &gateway.api_token_env {
            self.env_var(
                "gateway.api_token_env",
                name,
                "the bearer token for /v1, /api, /mcp and /metrics (or remove the key: \
                 without it only clients on this machine are served)",
            );
        }
        let token = &gateway.silent_token;
        if token.is_empty() {
            self.report(
                "gateway.silent_token",
                "is empty; a bot needs a word to say \"I have nothing to add\" (default \
                 \"NO_REPLY\")",
            );
        } else if token.chars().any(char::is_whitespace) {
            self.report(
                "gateway.silent_token",
                "contains whitespace; use one word such as \"NO_REPLY\" (replies are trimmed \
                 before they are compared with it)",
            );
        }
        self.turn_timeout("gateway.turn_timeout_seconds", gateway.turn_timeout_seconds);
        for (key, value, hint) in [
            (
                "gateway.header_timeout_seconds",
                gateway.header_timeout_seconds,
                " (seconds a client has to send its request headers)",
            ),
            (
                "gateway.idle_timeout_seconds",
                gateway.idle_timeout_seconds,
                " (seconds a kept-alive connection may wait for its next request)",
            ),
            (
                "gateway.body_timeout_seconds",
                gateway.body_timeout_seconds,
                " (seconds a request body may take to arrive)",
            ),
            (
                "gateway.max_connections",
                gateway.max_connections as u64,
                ": with no room no request is served",
            ),
            (
                "gateway.mcp_max_sessions",
                gateway.mcp_max_sessions as u64,
                " (MCP sessions open at once; 0 would refuse every MCP client)",
            ),
            (
                "gateway.mcp_session_idle_seconds",
                gateway.mcp_session_idle_seconds,
                " (seconds an unused MCP session lives)",
            ),
        ] {
            self.at_least_one(key, value, hint);
        }
        if gateway.mcp_max_init_bytes < MIN_MCP_INIT_BYTES {
            self.report(
                "gateway.mcp_max_init_bytes",
                format!(
                    "must be at least {MIN_MCP_INIT_BYTES}: an MCP client's `initialize` request \
                     (its name, version and capabilities) needs that much room"
                ),
            );
        }
    }

    pub(super) fn lanes(&mut self, config: &Config) {
        let lanes = &config.lanes;
        for (name, value) in [
            ("main", lanes.main),
            ("nested", lanes.nested),
            ("subagent", lanes.subagent),
            ("cron", lanes.cron),
        ] {
            self.at_least_one(
                &format!("lanes.{name}"),
                value as u64,
                ": a lane with no room never runs a turn",
            );
        }
        for (name, value) in [
            ("max_queued", lanes.max_queued),
            ("max_queued_per_session", lanes.max_queued_per_session),
        ] {
            self.at_least_one(
                &format!("lanes.{name}"),
                value as u64,
                ": with no room to wait, a message that arrives while a turn runs is refused",
            );
        }
    }

    pub(super) fn local(&mut self, config: &Config) {
        let local = &config.local;
        for (name, value, hint) in [
            (
                "max_rooms",
                local.max_rooms,
                ": a hub with no room takes no post",
            ),
            (
                "room_log_messages",
                local.room_log_messages,
                ": a room must show at least its last message",
            ),
            (
                "max_message_bytes",
                local.max_message_bytes,
                " (bytes a person may post in one message)",
            ),
        ] {
            self.at_least_one(&format!("local.{name}"), value as u64, hint);
        }
    }

    pub(super) fn limits(&mut self, config: &Config) {
        let limits = &config.limits;
        for (name, value) in [
            (
                "inbound_per_sender_per_minute",
                limits.inbound_per_sender_per_minute,
            ),
            (
                "bot_pair_events_per_minute",
                limits.bot_pair_events_per_minute,
            ),
            ("send_per_pair_per_minute", limits.send_per_pair_per_minute),
            (
                "send_per_sender_per_minute",
                limits.send_per_sender_per_minute,
            ),
            ("fan_out_targets", limits.fan_out_targets),
        ] {
            self.at_least_one(
                &format!("limits.{name}"),
                u64::from(value),
                " (a budget of 0 would refuse everything)",
            );
        }
        self.at_least_one(
            "limits.fan_out_window_seconds",
            limits.fan_out_window_seconds,
            "",
        );
        self.at_least_one(
            "limits.max_depth",
            u64::from(limits.max_depth),
            " (to turn bot-to-bot messages off, set [agent_to_agent] enabled = false)",
        );
        for (name, value) in [
            ("max_reply_bytes", limits.max_reply_bytes),
            ("max_posts_per_reply", limits.max_posts_per_reply),
        ] {
            self.at_least_one(
                &format!("limits.{name}"),
                value as u64,
                " (a reply must be able to say something)",
            );
        }
        if limits.max_ping_pong_turns > 5 {
            self.report(
                "limits.max_ping_pong_turns",
                format!(
                    "is {}; it must be between 0 and 5 (extra A<->B exchanges after a \
                     sessions_send)",
                    limits.max_ping_pong_turns
                ),
            );
        }
    }

    pub(super) fn agent_to_agent(&mut self, config: &Config) {
        self.bot_globs(config, "agent_to_agent.allow", &config.agent_to_agent.allow);
    }

    /// A list of bot ids or globs at `key`: a plain id must name a bot, a glob must compile.
    fn bot_globs(&mut self, config: &Config, key: &str, patterns: &[String]) {
        for (i, pattern) in patterns.iter().enumerate() {
            let key = format!("{key}[{i}]");
            let literal = !pattern.contains(['*', '?', '[', '{']);
            // A plain id must name a bot; a glob (or a known id) must compile.
            let known = !literal
                || self.bot_ref(config, key.clone(), pattern, |ids| {
                    format!("use a bot id or a glob (known: {ids})")
                });
            if known {
                self.glob(key, pattern);
            }
        }
    }

    /// `[a2a] expose`: like `agent_to_agent.allow`, bot ids or globs.
    pub(super) fn a2a(&mut self, config: &Config) {
        self.bot_globs(config, "a2a.expose", &config.a2a.expose);
        let mut seen = std::collections::HashSet::new();
        for (i, peer) in config.a2a.peers.iter().enumerate() {
            let key = |field: &str| format!("a2a.peers[{i}].{field}");
            if peer.id.parse::<crate::bot_id::BotId>().is_err() {
                self.report(
                    key("id"),
                    format!(
                        "`{}` is not a usable name: lowercase letters, digits, `-` and `_`",
                        peer.id
                    ),
                );
            } else if config.bots.iter().any(|b| b.id == peer.id) {
                self.report(
                    key("id"),
                    format!(
                        "`{}` is also a bot's id; give the peer another name so `a2a:{}` and \
                         the bot cannot be confused",
                        peer.id, peer.id
                    ),
                );
            } else if !seen.insert(peer.id.as_str()) {
                self.report(
                    key("id"),
                    format!("peer `{}` is defined twice; keep one", peer.id),
                );
            }
            self.url(key("url"), &peer.url);
            if let Some(name) = &peer.token_env {
                self.env_var(&key("token_env"), name, "the peer's bearer token");
            }
            self.at_least_one(
                &key("timeout_seconds"),
                peer.timeout_seconds,
                " (seconds one call to the peer may take)",
            );
        }
    }

    pub(super) fn chains(&mut self, config: &Config) {
        let chains = &config.chains;
        if let Some(coordinator) = &chains.coordinator {
            let known = self.bot_ref(config, "chains.coordinator", coordinator, |ids| {
                format!(
                    "name one of: {ids} (or remove the key to let baton coordinate round-robin)"
                )
            });
            if known && !coordinator_tools_allowed(config, coordinator) {
                self.report(
                    "chains.coordinator",
                    format!(
                        "bot `{coordinator}` coordinates chains, but its `tools` do not allow \
                         chain_pass and chain_close, so it could never hand the turn on or end \
                         a chain; add \"chain_*\" to its tools"
                    ),
                );
            }
        }
        self.at_least_one("chains.max_rounds", u64::from(chains.max_rounds), "");
        if chains.rounds == 0 || chains.rounds > chains.max_rounds.max(1) {
            self.report(
                "chains.rounds",
                format!(
                    "is {}; it must be between 1 and max_rounds ({})",
                    chains.rounds, chains.max_rounds
                ),
            );
        }
        self.at_least_one(
            "chains.turn_timeout_seconds",
            chains.turn_timeout_seconds,
            "",
        );
    }
}

/// Whether the bot's `tools` globs (the ones that compile; bad ones are reported elsewhere)
/// allow the tools a coordinator cannot do without.
fn coordinator_tools_allowed(config: &Config, bot: &str) -> bool {
    let Some(bot) = config.bots.iter().find(|b| b.id == bot) else {
        return false;
    };
    let mut globs = globset::GlobSetBuilder::new();
    for pattern in &bot.tools {
        if let Ok(glob) = globset::Glob::new(pattern) {
            globs.add(glob);
        }
    }
    let Ok(globs) = globs.build() else {
        return false;
    };
    ["chain_pass", "chain_close"]
        .iter()
        .all(|tool| globs.is_match(tool))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::assert_broken_reports;

    #[test]
    fn gateway_wide_sections_report_each_problem_by_key() {
        assert_broken_reports(
            &[
                "gateway.listen",
                "gateway.silent_token",
                "gateway.api_token_env",
                "lanes.nested",
                "lanes.max_queued_per_session",
                "local.room_log_messages",
                "limits.max_ping_pong_turns",
                "limits.send_per_pair_per_minute",
                "agent_to_agent.allow[1]",
                "agent_to_agent.allow[2]",
                "chains.coordinator",
                "chains.rounds",
                "a2a.peers[0].id",
                "a2a.peers[0].url",
                "a2a.peers[1].id",
                "a2a.peers[3].id",
            ],
            // `snark` is a bot: a plain id that names one is fine.
            &["agent_to_agent.allow[0]", "a2a.peers[2].id"],
        );
    }

    #[test]
    fn a_coordinator_must_be_able_to_pass_and_close() {
        use super::super::super::Config;
        let text = |tools: &str| {
            format!(
                "[chains]\ncoordinator = \"snark\"\n\n[[bots]]\nid = \"snark\"\n\
                 backend = \"echo\"\ntools = {tools}\n"
            )
        };
        let env = |_: &str| None;
        let here = std::path::Path::new(".");
        let problems = Config::from_toml(&text("[\"chain_message\"]"), here, &env)
            .expect_err("a coordinator without chain_pass is refused");
        let shown = format!("{problems:?}");
        assert!(shown.contains("chains.coordinator"), "{shown}");
        assert!(
            shown.contains("add \\\"chain_*\\\" to its tools"),
            "{shown}"
        );
        for ok in [
            "[\"chain_*\"]",
            "[\"chain_pass\", \"chain_close\"]",
            "[\"*\"]",
        ] {
            assert!(Config::from_toml(&text(ok), here, &env).is_ok(), "{ok}");
        }
    }

    #[test]
    fn the_database_url_must_be_a_postgres_url_and_is_never_repeated() {
        use super::super::fixture::{keys, parse};
        use super::super::validate;
        let config = parse("[gateway]\ndatabase_url_env = \"BATON_DATABASE_URL\"\n");
        let holding = |url: &'static str| move |_: &str| Some(url.to_owned());
        let good = holding("postgres://baton:pw-s3cret@db.internal:5432/baton");
        assert!(validate(&config, &good).is_empty());
        let bad = holding("postgres://baton:pw-s3cret@db.internal:port/baton");
        let problems = validate(&config, &bad);
        assert_eq!(keys(&problems), ["gateway.database_url_env"]);
        let message = problems[0].to_string();
        assert!(message.contains("`BATON_DATABASE_URL`"), "{message}");
        assert!(
            message.contains("postgres://USER:PASSWORD@HOST"),
            "{message}"
        );
        assert!(!message.contains("pw-s3cret"), "{message}");
        let unset = validate(&config, &|_: &str| None);
        assert_eq!(keys(&unset), ["gateway.database_url_env"]);
    }
}
