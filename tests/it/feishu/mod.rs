//! The Feishu/Lark adapter end to end: a real gateway with two Feishu apps (bots `snark` and
//! `caid`) talking to a fake Feishu on 127.0.0.1 over the long connection and webhooks, and bots
//! on a fake model server. Every wait is on a condition with a deadline.
//!
//! Feishu names everyone per app: the same person or bot has a different `open_id` in each app,
//! so each app's copy of a message names the people in it with that app's ids.

mod connection;
mod messages;
mod siblings;
mod webhook;

use std::path::Path;
use std::time::Duration;

use baton_contract::{Platform, Secret};
use baton_feishu::api::Api;
use baton_feishu::{FeishuSettings, LARK_API_URL, Mode};
use serde_json::{Value, json};

use crate::support::fake_feishu::{
    FakeFeishu, Outcome, RateLimit, Target, message_event, signed_headers, webhook_body,
};
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::TestGateway;

const ENCRYPT_KEY: &str = "test_encrypt_key_123";
const TOKEN: &str = "verification-token";
/// Each bot's own open_id, from its own app's `bot/v3/info`.
const SNARK: &str = "ou_snark_self";
const CAID: &str = "ou_caid_self";
/// The same bots as the *other* app sees them.
const SNARK_IN_CAID: &str = "ou_snark_as_seen_by_caid";
const CAID_IN_SNARK: &str = "ou_caid_as_seen_by_snark";
/// One human, as each app sees them.
const HUMAN_IN_SNARK: &str = "ou_human_as_seen_by_snark";
const HUMAN_IN_CAID: &str = "ou_human_as_seen_by_caid";
const GROUP: (&str, &str) = ("oc_group", "group");

/// Both bots on `platform`, snark in `snark_mode`, caid on the long connection.
fn config(
    model: &FakeOpenAi,
    feishu: &FakeFeishu,
    platform: &str,
    snark_mode: &str,
    extra: &str,
) -> String {
    let mut text = String::from("[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n");
    if !extra.contains("[chats_default]") {
        text.push_str("[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n");
    }
    for bot in ["snark", "caid"] {
        let upper = bot.to_uppercase();
        let mode = if bot == "snark" {
            snark_mode
        } else {
            "websocket"
        };
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"{platform}\"\nmode = \"{mode}\"\n\
             app_id = \"cli_{bot}\"\napp_secret_env = \"{upper}_FEISHU_APP_SECRET\"\n\
             verification_token_env = \"{upper}_FEISHU_VERIFICATION_TOKEN\"\n\
             encrypt_key_env = \"{upper}_FEISHU_ENCRYPT_KEY\"\napi_url = \"{}\"\n",
            model.base_url, feishu.api_url
        ));
    }
    text.push_str(extra);
    text
}

fn env(name: &str) -> Option<String> {
    let (bot, rest) = name.split_once("_FEISHU_")?;
    Some(match rest {
        "APP_SECRET" => format!("secret-{}", bot.to_lowercase()),
        "VERIFICATION_TOKEN" => TOKEN.to_owned(),
        "ENCRYPT_KEY" => ENCRYPT_KEY.to_owned(),
        _ => return None,
    })
}

struct World {
    model: FakeOpenAi,
    feishu: FakeFeishu,
    gateway: TestGateway,
    _db: tempfile::TempDir,
}

async fn world_on(
    platform: &str,
    snark_mode: &str,
    extra: &str,
    setup: impl Fn(&FakeFeishu),
) -> World {
    let model = FakeOpenAi::start().await;
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", SNARK);
    feishu.app("caid", CAID);
    setup(&feishu);
    let (dir, db) = crate::support::gateway::temp_db();
    let text = config(&model, &feishu, platform, snark_mode, extra);
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    if snark_mode == "websocket" {
        feishu.wait_connected("snark", 1).await;
    }
    feishu.wait_connected("caid", 1).await;
    let w = World {
        model,
        feishu,
        gateway,
        _db: dir,
    };
    w.wait_ready().await;
    w
}

async fn world(snark_mode: &str, extra: &str) -> World {
    world_on("feishu", snark_mode, extra, |_| {}).await
}

impl World {
    /// Wait until every account is connected (identity learned).
    async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + crate::support::gateway::DEADLINE;
        loop {
            let status = self
                .gateway
                .http
                .get(format!("{}/readyz", self.gateway.base))
                .send()
                .await
                .unwrap()
                .status();
            if status == 200 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "gateway never ready"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Push `event` to `app` over its long connection, wait for the ack, then for the gateway to
    /// come to rest.
    async fn deliver(&self, app: &str, event: &Value) {
        let frame = self.feishu.push_event(app, event);
        self.feishu.wait_for(|f| f.acks_for(&frame) == 1).await;
        self.gateway.settle().await;
    }

    /// Post a webhook to `/hooks/<platform>/snark`; returns status and body.
    async fn hook(
        &self,
        platform: &str,
        body: &str,
        headers: Vec<(&'static str, String)>,
    ) -> (u16, String) {
        let mut request = self
            .gateway
            .http
            .post(format!("{}/hooks/{platform}/snark", self.gateway.base))
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        self.gateway.settle().await;
        (status, text)
    }
}

/// A group message from the human mentioning `mentioned` (open_ids as `app` sees them).
fn group_mention(app: &str, event_id: &str, message_id: &str, mentioned: &[(&str, &str)]) -> Value {
    let human = if app == "snark" {
        HUMAN_IN_SNARK
    } else {
        HUMAN_IN_CAID
    };
    let placeholders: Vec<String> = (1..=mentioned.len())
        .map(|n| format!("@_user_{n}"))
        .collect();
    let text = format!("{} please look", placeholders.join(" "));
    message_event(app, event_id, message_id, GROUP, human, &text, mentioned)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
