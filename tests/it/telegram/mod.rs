//! The Telegram adapter end to end: a real gateway with two Telegram bots (`snark` and `caid`)
//! on a fake Bot API on 127.0.0.1 (long polling, or a webhook), and bots on a fake model server.
//! Every wait is on a condition with a deadline. `client_library` checks the fake itself against
//! python-telegram-bot, so the shapes the adapter is tested on are the ones real clients read.

mod bots;
mod client_library;
mod files;
mod kills;
mod messages;
mod personas;
mod setup;
mod streaming;
mod webhook;

use std::path::Path;

use serde_json::Value;

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_telegram::{FakeTelegram, mention};
use crate::support::gateway::TestGateway;

/// Each bot's Telegram user id and @username.
const SNARK: (i64, &str) = (7001, "snark_bot");
const CAID: (i64, &str) = (7002, "caid_bot");
/// A person, and the supergroup the tests talk in.
const HUMAN: (i64, &str) = (5005, "Ada");
const GROUP: i64 = -1001234567890;
/// The secret the webhook tests give `setWebhook`.
const SECRET: &str = "s3cr3t-token_for-the-hook";

/// Both bots, each with `bot_keys`; snark in `snark_mode`, caid polling.
fn config(
    model: &FakeOpenAi,
    telegram: &FakeTelegram,
    snark_mode: &str,
    bot_keys: &str,
    extra: &str,
) -> String {
    let mut text = String::from(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\
         public_url = \"https://baton.example.com\"\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n",
    );
    for bot in ["snark", "caid"] {
        let upper = bot.to_uppercase();
        let mode = if bot == "snark" {
            snark_mode
        } else {
            "polling"
        };
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\nbase_url = \"{}\"\n{bot_keys}\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"telegram\"\nmode = \"{mode}\"\n\
             bot_token_env = \"{upper}_TELEGRAM_BOT_TOKEN\"\n\
             secret_token_env = \"{upper}_TELEGRAM_SECRET\"\napi_url = \"{}\"\n",
            model.base_url, telegram.api_url
        ));
    }
    text.push_str(extra);
    text
}

fn env(name: &str) -> Option<String> {
    let (bot, rest) = name.split_once("_TELEGRAM_")?;
    Some(match rest {
        "BOT_TOKEN" => format!("tok-{}", bot.to_lowercase()),
        "SECRET" => SECRET.to_owned(),
        _ => return None,
    })
}

struct World {
    model: FakeOpenAi,
    telegram: FakeTelegram,
    gateway: TestGateway,
    _db: tempfile::TempDir,
}

async fn world_in(snark_mode: &str, bot_keys: &str, extra: &str) -> World {
    let model = FakeOpenAi::start().await;
    let telegram = FakeTelegram::start().await;
    telegram.bot("snark", SNARK.0, SNARK.1);
    telegram.bot("caid", CAID.0, CAID.1);
    let (dir, db) = crate::support::gateway::temp_db();
    let text = config(&model, &telegram, snark_mode, bot_keys, extra);
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    let w = World {
        model,
        telegram,
        gateway,
        _db: dir,
    };
    w.wait_ready().await;
    w
}

async fn world(extra: &str) -> World {
    world_in("polling", "", extra).await
}

impl World {
    /// Wait until every account knows who it is and the pollers are polling.
    async fn wait_ready(&self) {
        let url = format!("{}/readyz", self.gateway.base);
        let http = self.gateway.http.clone();
        crate::support::process::eventually(
            crate::support::gateway::DEADLINE,
            "the gateway ready",
            || {
                let request = http.get(&url).send();
                async move { (request.await.ok()?.status() == 200).then_some(()) }
            },
        )
        .await;
        self.telegram.wait_for(|t| t.polls("caid") > 0).await;
    }

    /// The human says `text` in the group, mentioning `@username` first when given; returns
    /// the message id.
    fn say(&self, to: Option<&str>, text: &str, reply_to: Option<i64>) -> i64 {
        let (text, entities) = match to {
            Some(name) => (
                format!("@{name} {text}"),
                Value::Array(vec![mention(0, name)]),
            ),
            None => (text.to_owned(), Value::Array(vec![])),
        };
        self.telegram
            .say(GROUP, HUMAN, &text, entities, reply_to, None)
    }

    /// Wait until the polling bots confirmed every update and the gateway is at rest, until
    /// nothing new arrives (a post in bot-to-bot mode is an update for the other bot).
    async fn settle(&self) {
        loop {
            for bot in ["snark", "caid"] {
                if self.telegram.webhook(bot).is_none() {
                    self.telegram.wait_confirmed(bot).await;
                }
            }
            self.gateway.settle().await;
            let polling = ["snark", "caid"]
                .into_iter()
                .filter(|bot| self.telegram.webhook(bot).is_none());
            if polling
                .clone()
                .all(|bot| self.telegram.pending(bot).is_empty())
            {
                return;
            }
        }
    }
}
