//! The Slack adapter end to end: a real gateway with two Slack apps (bots `snark` and `caid`)
//! talking to a fake Slack on 127.0.0.1 over Socket Mode and the Events API, and bots on a fake
//! model server. Every wait is on a condition with a deadline.

mod chains;
mod messages;
mod pairing;
mod readiness;
mod transports;

use std::path::Path;

use serde_json::{Value, json};

use crate::support::chain_steps::on_chain;
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::{
    FakeSlack, event_body, events_envelope, signed_headers, unix_now,
};
use crate::support::gateway::TestGateway;

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SNARK: &str = "U_SNARK";
const CAID: &str = "U_CAID";
const HUMAN: &str = "U_HUMAN";
const ADMIN: &str = "U_ADMIN";

/// Bots on Slack, each its own app: `snark_mode` for snark (`socket` or `events`), socket for
/// the others; `bot_keys` added to every bot; `extra` appended.
fn config(
    model: &FakeOpenAi,
    slack: &FakeSlack,
    bots: &[&str],
    bot_keys: &str,
    snark_mode: &str,
    extra: &str,
) -> String {
    let mut text = format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
         [admins]\nslack = [\"{ADMIN}\"]\n"
    );
    if !extra.contains("[chats_default]") {
        text.push_str("\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n");
    }
    for bot in bots {
        let upper = bot.to_uppercase();
        let mode = if *bot == "snark" {
            snark_mode
        } else {
            "socket"
        };
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\nbase_url = \"{}\"\n{bot_keys}\n\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"slack\"\nmode = \"{mode}\"\n\
             app_token_env = \"{upper}_SLACK_APP_TOKEN\"\nbot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\n\
             signing_secret_env = \"{upper}_SLACK_SIGNING_SECRET\"\napi_url = \"{}\"\n",
            model.base_url, slack.api_url
        ));
    }
    text.push_str(extra);
    text
}

fn env(name: &str) -> Option<String> {
    let (bot, rest) = name.split_once("_SLACK_")?;
    let bot = bot.to_lowercase();
    Some(match rest {
        "APP_TOKEN" => format!("xapp-{bot}"),
        "BOT_TOKEN" => format!("xoxb-{bot}"),
        "SIGNING_SECRET" => SECRET.to_owned(),
        _ => return None,
    })
}

struct World {
    model: FakeOpenAi,
    slack: FakeSlack,
    gateway: TestGateway,
    _db: tempfile::TempDir,
    db: std::path::PathBuf,
}

async fn world(snark_mode: &str, extra: &str) -> World {
    world_of(&["snark", "caid"], "", snark_mode, extra).await
}

/// A world with `bots` (bot user id `U_<BOT>`), `bot_keys` on each of them.
async fn world_of(bots: &[&str], bot_keys: &str, snark_mode: &str, extra: &str) -> World {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    for bot in bots {
        slack.app(bot, &format!("U_{}", bot.to_uppercase()));
    }
    let (dir, db) = crate::support::gateway::temp_db();
    let text = config(&model, &slack, bots, bot_keys, snark_mode, extra);
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    for bot in bots {
        if *bot != "snark" || snark_mode == "socket" {
            slack.wait_connected(bot, 1).await;
        }
    }
    World {
        model,
        slack,
        gateway,
        _db: dir,
        db,
    }
}

/// A human message event at `ts` in `channel`.
fn said(user: &str, channel: &str, ts: &str, text: &str) -> Value {
    json!({ "user": user, "text": text, "ts": ts, "channel": channel, "event_ts": ts,
            "channel_type": "channel" })
}

impl World {
    /// Push `envelope` to `app` and wait for its ack (the gateway has taken the event), then for
    /// the gateway to come to rest.
    async fn deliver(&self, app: &str, envelope: Value) {
        let id = envelope["envelope_id"].as_str().unwrap().to_owned();
        let before = self.slack.acks().iter().filter(|a| **a == id).count();
        self.slack.push(app, &envelope);
        self.slack
            .wait_for(|s| s.acks().iter().filter(|a| **a == id).count() > before)
            .await;
        self.gateway.settle().await;
    }

    async fn hook(&self, body: &str, headers: Vec<(&'static str, String)>, form: bool) -> u16 {
        let mut request = self
            .gateway
            .http
            .post(format!("{}/hooks/slack/snark", self.gateway.base))
            .header(
                "content-type",
                if form {
                    "application/x-www-form-urlencoded"
                } else {
                    "application/json"
                },
            )
            .body(body.to_owned());
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let status = request.send().await.unwrap().status().as_u16();
        self.gateway.settle().await;
        status
    }
}
