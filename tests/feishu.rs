//! The Feishu/Lark adapter end to end: a real gateway with two Feishu apps (bots `snark` and
//! `caid`) talking to a fake Feishu on 127.0.0.1 over the long connection and webhooks, and bots
//! on a fake model server. Every wait is on a condition with a deadline.
//!
//! Feishu names everyone per app: the same person or bot has a different `open_id` in each app,
//! so each app's copy of a message names the people in it with that app's ids.

mod support;

use std::path::Path;
use std::time::Duration;

use baton_contract::{Platform, Secret};
use baton_feishu::api::Api;
use baton_feishu::{FeishuSettings, LARK_API_URL, Mode};
use serde_json::{Value, json};
use support::fake_feishu::{
    FakeFeishu, Outcome, RateLimit, Target, message_event, signed_headers, webhook_body,
};
use support::fake_openai::{FakeOpenAi, Step};
use support::gateway::TestGateway;

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
    let mut text = String::from(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n",
    );
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
    let (dir, db) = support::gateway::temp_db();
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
        let deadline = tokio::time::Instant::now() + support::gateway::DEADLINE;
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

#[tokio::test]
async fn a_group_mention_gets_one_reply_to_that_message() {
    let w = world("websocket", "").await;
    w.model.script("snark", Step::reply("hi from snark"));
    // Both apps are in the group, so both get the message; only snark is mentioned.
    w.deliver(
        "snark",
        &group_mention("snark", "ev-1s", "om_1", &[(SNARK, "Snark")]),
    )
    .await;
    w.deliver(
        "caid",
        &group_mention("caid", "ev-1c", "om_1", &[(SNARK_IN_CAID, "Snark")]),
    )
    .await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].app, "snark", "posted with snark's own token");
    assert_eq!(posts[0].target, Target::Reply("om_1".into()));
    assert_eq!(posts[0].text, "hi from snark");
    assert_eq!(posts[0].msg_type, "text");
    assert!(
        !posts[0].in_thread,
        "a top-level message is answered in the chat"
    );
    assert!(!posts[0].uuid.is_empty() && posts[0].uuid.len() <= 50);
    assert_eq!(w.model.requests_for("caid").len(), 0);
    let turn = w.model.requests_for("snark");
    assert!(
        turn[0].to_string().contains("@Snark please look"),
        "the placeholder reads as the name"
    );
    // Every event frame was acknowledged with code 200, echoing the frame.
    let acks = w.feishu.acks();
    assert_eq!(acks.len(), 2);
    assert!(
        acks.iter()
            .all(|a| a.code == 200 && a.biz_rt && a.seq_id > 0)
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_p2p_message_gets_a_reply() {
    let w = world("websocket", "").await;
    w.model.script("caid", Step::reply("hello human"));
    let dm = message_event(
        "caid",
        "ev-dm",
        "om_dm",
        ("oc_dm", "p2p"),
        HUMAN_IN_CAID,
        "hi",
        &[],
    );
    w.deliver("caid", &dm).await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].app, "caid");
    assert_eq!(posts[0].target, Target::Reply("om_dm".into()));
    assert_eq!(posts[0].text, "hello human");
    w.gateway.stop().await;
}

#[tokio::test]
async fn at_bot_a_at_bot_b_wakes_both_once_each() {
    let w = world("websocket", "").await;
    w.model.script("snark", Step::reply("snark here"));
    w.model.script("caid", Step::reply("caid here"));
    let for_snark = group_mention(
        "snark",
        "ev-2s",
        "om_2",
        &[(SNARK, "Snark"), (CAID_IN_SNARK, "Caid")],
    );
    let for_caid = group_mention(
        "caid",
        "ev-2c",
        "om_2",
        &[(SNARK_IN_CAID, "Snark"), (CAID, "Caid")],
    );
    w.deliver("snark", &for_snark).await;
    w.deliver("caid", &for_caid).await;
    // Feishu redelivers each (no ack seen in time, say): nothing more happens.
    w.deliver("snark", &for_snark).await;
    w.deliver("caid", &for_caid).await;
    let mut apps: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
    apps.sort();
    assert_eq!(apps, ["caid", "snark"]);
    assert!(
        w.feishu
            .posts()
            .iter()
            .all(|p| p.target == Target::Reply("om_2".into()))
    );
    assert_eq!(w.model.requests_for("snark").len(), 1);
    assert_eq!(w.model.requests_for("caid").len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn at_all_wakes_no_bot_by_default_and_every_bot_where_the_chat_allows_it() {
    let extra = "\n[[chats]]\nplatform = \"feishu\"\nid = \"oc_keen\"\nrespond_to_at_all = true\n";
    let w = world("websocket", extra).await;
    let all = |app: &str, chat: &str, n: &str| {
        let human = if app == "snark" {
            HUMAN_IN_SNARK
        } else {
            HUMAN_IN_CAID
        };
        let mut e = message_event(
            app,
            &format!("ev-all-{app}-{n}"),
            &format!("om_all_{n}"),
            (chat, "group"),
            human,
            "@_all standup time",
            &[],
        );
        e["event"]["message"]["mentions"] =
            json!([{ "key": "@_all", "id": {}, "name": "所有人", "tenant_key": "tenant" }]);
        e
    };
    for app in ["snark", "caid"] {
        w.deliver(app, &all(app, "oc_group", "1")).await;
    }
    assert!(
        w.feishu.all_posts().is_empty(),
        "@_all wakes nobody by default"
    );
    assert_eq!(w.model.requests().len(), 0);
    for app in ["snark", "caid"] {
        w.deliver(app, &all(app, "oc_keen", "2")).await;
    }
    assert_eq!(
        w.feishu.posts().len(),
        2,
        "respond_to_at_all = true wakes both"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_replay_after_reconnect_gets_no_second_reply() {
    let w = world("websocket", "").await;
    let event = group_mention("snark", "ev-3", "om_3", &[(SNARK, "Snark")]);
    w.deliver("snark", &event).await;
    assert_eq!(w.feishu.posts().len(), 1);
    w.feishu.drop_connection("snark");
    w.feishu.wait_connected("snark", 2).await;
    // The server replays the event on the new connection: acked, not answered again.
    w.deliver("snark", &event).await;
    assert_eq!(w.feishu.posts().len(), 1);
    assert_eq!(w.model.requests_for("snark").len(), 1);
    // The new connection works.
    w.deliver(
        "snark",
        &group_mention("snark", "ev-4", "om_4", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.posts().len(), 2);
    w.gateway.stop().await;
}

#[tokio::test]
async fn pings_follow_the_server_interval_and_a_silent_connection_is_replaced() {
    let w = world_on("feishu", "websocket", "", |f| {
        f.set_ping_interval("snark", 0.3)
    })
    .await;
    w.feishu.wait_for(|f| f.pings("snark").len() >= 3).await;
    let pings = w.feishu.pings("snark");
    let gap = pings[2] - pings[1];
    assert!(
        gap >= Duration::from_millis(150) && gap < Duration::from_secs(5),
        "pings every PingInterval: {gap:?}"
    );
    assert_eq!(w.feishu.connects("snark"), 1);
    // The connection stops answering anything: the watchdog replaces it.
    w.feishu.mute("snark");
    w.feishu.wait_connected("snark", 2).await;
    assert!(
        w.feishu.endpoint_calls("snark") >= 2,
        "a fresh endpoint each time"
    );
    w.deliver(
        "snark",
        &group_mention("snark", "ev-5", "om_5", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.posts().len(), 1, "the next event is answered");
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_fragmented_event_is_reassembled_answered_and_acked_once() {
    let w = world("websocket", "").await;
    let event = group_mention("snark", "ev-6", "om_6", &[(SNARK, "Snark")]);
    let frame = w.feishu.push_fragments("snark", &event, 3);
    w.feishu.wait_for(|f| f.acks_for(&frame) >= 1).await;
    w.gateway.settle().await;
    assert_eq!(w.feishu.acks_for(&frame), 1, "one ack for the whole event");
    assert_eq!(w.feishu.posts().len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_rate_limit_then_success_is_exactly_one_message() {
    let w = world("websocket", "").await;
    w.feishu
        .rate_limit_next(&[RateLimit::Code(230020), RateLimit::Http429]);
    let started = std::time::Instant::now();
    w.deliver(
        "snark",
        &group_mention("snark", "ev-7", "om_7", &[(SNARK, "Snark")]),
    )
    .await;
    w.feishu.wait_for(|f| !f.posts().is_empty()).await;
    let all = w.feishu.all_posts();
    assert_eq!(all.len(), 3, "two refusals, one success: {all:?}");
    assert_eq!(w.feishu.posts().len(), 1);
    assert!(
        all.iter().all(|p| p.uuid == all[0].uuid),
        "the retry reuses the uuid"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited as asked"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_refreshed_once_and_the_send_retried() {
    // Without the typing reaction, the post is the first call to meet the expired token.
    let w = world("websocket", "\n[feedback]\ntyping = false\n").await;
    assert_eq!(w.feishu.token_fetches("snark"), 1);
    w.deliver(
        "snark",
        &group_mention("snark", "ev-8", "om_8", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.token_fetches("snark"), 1, "the token is cached");
    w.feishu.expire_tokens("snark");
    w.deliver(
        "snark",
        &group_mention("snark", "ev-9", "om_9", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.token_fetches("snark"), 2, "one refresh");
    let all = w.feishu.all_posts();
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[1].outcome, Outcome::TokenRefused);
    assert!(matches!(all[2].outcome, Outcome::Sent(_)));
    assert_eq!(all[2].target, Target::Reply("om_9".into()));
    w.gateway.stop().await;
}

#[tokio::test]
async fn the_tenant_token_is_refreshed_before_it_expires() {
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", SNARK);
    feishu.set_token_expire(2);
    let api = Api::new(&feishu.api_url, "cli_snark", Secret::new("secret-snark"));
    let first = api.tenant_token().await.unwrap();
    assert_eq!(api.tenant_token().await.unwrap(), first, "cached");
    assert_eq!(feishu.token_fetches("snark"), 1);
    // With 2 s to live, it is replaced after half its life rather than used until it dies.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_ne!(api.tenant_token().await.unwrap(), first);
    assert_eq!(feishu.token_fetches("snark"), 2);
}

#[tokio::test]
async fn a_reply_in_a_topic_stays_in_the_topic() {
    let w = world("websocket", "").await;
    let mut event = group_mention("snark", "ev-10", "om_10", &[(SNARK, "Snark")]);
    event["event"]["message"]["root_id"] = "om_root".into();
    event["event"]["message"]["parent_id"] = "om_root".into();
    event["event"]["message"]["thread_id"] = "omt_topic".into();
    w.deliver("snark", &event).await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].target, Target::Reply("om_10".into()));
    assert!(posts[0].in_thread);
    let sessions = w.gateway.get("/api/sessions").await.to_string();
    assert!(
        sessions.contains("bot:snark:feishu:snark:oc_group:thread:omt_topic"),
        "the topic is its own session: {sessions}"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn webhook_answers_url_verification_plain_and_encrypted() {
    let w = world("webhook", "").await;
    let plain = json!({"challenge": "ajls384kdjx98XX", "token": TOKEN, "type": "url_verification"});
    let (status, body) = w.hook("feishu", &plain.to_string(), vec![]).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["challenge"],
        "ajls384kdjx98XX"
    );
    let encrypted = webhook_body(
        &json!({"challenge": "c-enc", "token": TOKEN, "type": "url_verification"}),
        Some(ENCRYPT_KEY),
    );
    let (status, body) = w.hook("feishu", &encrypted, vec![]).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["challenge"],
        "c-enc"
    );
    let wrong = json!({"challenge": "x", "token": "nope", "type": "url_verification"});
    assert_eq!(w.hook("feishu", &wrong.to_string(), vec![]).await.0, 401);
    w.gateway.stop().await;
}

#[tokio::test]
async fn webhook_refuses_bad_signatures_tokens_and_bodies_and_records_nothing() {
    let w = world("webhook", "").await;
    let event = group_mention("snark", "ev-w1", "om_w1", &[(SNARK, "Snark")]);
    let body = webhook_body(&event, Some(ENCRYPT_KEY));
    let now = unix_now();
    assert_eq!(w.hook("feishu", &body, vec![]).await.0, 401, "unsigned");
    let mut forged = signed_headers(ENCRYPT_KEY, now, &body);
    forged[2].1 = signed_headers("wrong-key", now, &body)[2].1.clone();
    assert_eq!(w.hook("feishu", &body, forged).await.0, 401, "badly signed");
    assert_eq!(
        w.hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, now - 301, &body)
        )
        .await
        .0,
        401,
        "stale"
    );
    let mut bad_token = event.clone();
    bad_token["header"]["token"] = "not-the-token".into();
    let bad_token = webhook_body(&bad_token, Some(ENCRYPT_KEY));
    assert_eq!(
        w.hook(
            "feishu",
            &bad_token,
            signed_headers(ENCRYPT_KEY, now, &bad_token)
        )
        .await
        .0,
        401,
        "wrong verification token"
    );
    let garbage = "{\"encrypt\": \"bm90IGFuIGV2ZW50\"}";
    assert_eq!(
        w.hook("feishu", garbage, signed_headers(ENCRYPT_KEY, now, garbage))
            .await
            .0,
        400,
        "does not decrypt"
    );
    assert_eq!(
        w.hook(
            "feishu",
            "not json",
            signed_headers(ENCRYPT_KEY, now, "not json")
        )
        .await
        .0,
        400
    );
    assert!(w.feishu.all_posts().is_empty());
    assert_eq!(w.model.requests().len(), 0);
    let transcript = w
        .gateway
        .transcript("bot:snark:feishu:snark:oc_group")
        .await;
    assert!(transcript.is_empty(), "nothing recorded: {transcript:?}");
    // The genuine request is still taken afterwards: nothing was claimed by the refused ones.
    let (status, answer) = w
        .hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap()["msg"],
        "success"
    );
    w.feishu.wait_for(|f| f.posts().len() == 1).await;
    w.gateway.stop().await;
}

#[tokio::test]
async fn webhook_event_is_answered_once_and_a_retry_is_a_duplicate() {
    let w = world("webhook", "").await;
    w.model.script("snark", Step::reply("over http"));
    let event = group_mention("snark", "ev-w2", "om_w2", &[(SNARK, "Snark")]);
    let body = webhook_body(&event, Some(ENCRYPT_KEY));
    let started = std::time::Instant::now();
    let (status, _) = w
        .hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered inside Feishu's 3 s"
    );
    w.feishu.wait_for(|f| f.posts().len() == 1).await;
    // Feishu retries (same event id, freshly signed): 200 again, nothing new.
    let (status, _) = w
        .hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].text, "over http");
    assert_eq!(posts[0].target, Target::Reply("om_w2".into()));
    assert_eq!(w.model.requests_for("snark").len(), 1);
    let transcript = w
        .gateway
        .transcript("bot:snark:feishu:snark:oc_group")
        .await;
    let text = serde_json::to_string(&transcript).unwrap();
    assert!(
        text.contains("om_w2"),
        "the inbound message is recorded: {text}"
    );
    assert!(
        !text.contains(TOKEN),
        "the verification token is not: {text}"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn lark_uses_the_lark_host_unless_api_url_overrides_it() {
    let default = FeishuSettings::new(
        Platform::Lark,
        "snark".into(),
        Mode::Websocket,
        "cli_snark",
        Secret::new("s"),
    );
    assert_eq!(default.api_url, LARK_API_URL);
    // With `api_url` set (here: the fake), a lark account talks there, over both modes.
    let w = world_on("lark", "webhook", "", |_| {}).await;
    assert!(w.feishu.bot_info_calls("snark") >= 1 && w.feishu.bot_info_calls("caid") >= 1);
    w.deliver(
        "caid",
        &group_mention("caid", "ev-l1", "om_l1", &[(CAID, "Caid")]),
    )
    .await;
    let event = group_mention("snark", "ev-l2", "om_l2", &[(SNARK, "Snark")]);
    let body = webhook_body(&event, Some(ENCRYPT_KEY));
    let (status, _) = w
        .hook(
            "lark",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    w.feishu.wait_for(|f| f.posts().len() == 2).await;
    let sessions = w.gateway.get("/api/sessions").await.to_string();
    assert!(
        sessions.contains("bot:snark:lark:snark:oc_group"),
        "{sessions}"
    );
    assert_eq!(
        w.hook("feishu", &body, vec![]).await.0,
        404,
        "no feishu account named snark"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn an_always_bot_leaves_a_message_for_another_bot_alone() {
    let extra = "\n[[chats]]\nplatform = \"feishu\"\nid = \"oc_always\"\nactivation = \"always\"\n";
    let w = world("websocket", extra).await;
    let chat = ("oc_always", "group");
    // The fake names each app after its bot (`caid`); snark's app knows caid by another id.
    let for_caid = |app: &str, id: &str, human: &str| {
        message_event(
            app,
            &format!("ev-a-{app}"),
            "om_a1",
            chat,
            human,
            "@_user_1 fix this",
            &[(id, "caid")],
        )
    };
    w.deliver("snark", &for_caid("snark", CAID_IN_SNARK, HUMAN_IN_SNARK))
        .await;
    w.deliver("caid", &for_caid("caid", CAID, HUMAN_IN_CAID))
        .await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1, "only caid answers: {posts:?}");
    assert_eq!(posts[0].app, "caid");
    let plain = message_event(
        "snark",
        "ev-a-2",
        "om_a2",
        chat,
        HUMAN_IN_SNARK,
        "anyone?",
        &[],
    );
    w.deliver("snark", &plain).await;
    assert_eq!(
        w.feishu.posts().len(),
        2,
        "snark answers everything else here"
    );
    w.gateway.stop().await;
}

/// Both bots in `oc_group`, each allowed to wake the other, with `activation` there.
fn siblings_chat(activation: &str) -> String {
    format!(
        "\n[limits]\nmax_bot_reply_chain = 3\n\n[[chats]]\nplatform = \"feishu\"\nid = \"{}\"\n\
         activation = \"{activation}\"\nallow_bots = [\"snark\", \"caid\"]\n",
        GROUP.0
    )
}

/// A human message in the group @mentioning snark, delivered to both apps (as each sees it).
async fn human_mentions_snark(w: &World, n: u32, text: &str) {
    human_mentions(w, n, "snark", text).await;
}

/// A human message in the group @mentioning `bot`, delivered to both apps (as each sees it).
async fn human_mentions(w: &World, n: u32, bot: &str, text: &str) {
    let message_id = format!("om_h{n}");
    for (app, human) in [("snark", HUMAN_IN_SNARK), ("caid", HUMAN_IN_CAID)] {
        let seen = match (app, bot) {
            ("snark", "snark") => SNARK,
            ("snark", _) => CAID_IN_SNARK,
            (_, "snark") => SNARK_IN_CAID,
            _ => CAID,
        };
        let event = message_event(
            app,
            &format!("ev-h{n}-{app}"),
            &message_id,
            GROUP,
            human,
            &format!("@_user_1 {text}"),
            &[(seen, bot)],
        );
        w.deliver(app, &event).await;
    }
}

/// Events the pipeline has taken from Feishu: (new, duplicates).
fn feishu_events(w: &World) -> (u64, u64) {
    let metrics = w.gateway.gateway.dispatcher().shared().metrics();
    (
        metrics.get(&baton::metrics::EVENTS_IN, "feishu"),
        metrics.get(&baton::metrics::DUPLICATES, "feishu"),
    )
}

#[tokio::test]
async fn two_always_bots_see_each_others_posts_bounded_by_max_bot_reply_chain() {
    let w = world("websocket", &siblings_chat("always")).await;
    for _ in 0..10 {
        w.model.script("snark", Step::reply("over to you"));
        w.model.script("caid", Step::reply("back to you"));
    }
    // The human wakes snark (caid leaves a message for another bot alone); then each post is
    // handed to the other bot, which answers: 3 bot-woken replies (caid, snark, caid), and the
    // 4th bot post wakes nobody until a human speaks. Exactly as on Discord.
    human_mentions_snark(&w, 1, "start").await;
    w.gateway.settle().await;
    let authors: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
    assert_eq!(
        authors,
        ["snark", "caid", "snark", "caid"],
        "the chain stops after max_bot_reply_chain bot-woken replies"
    );
    assert_eq!(w.model.requests().len(), 4, "no fifth turn");
    // The human's message reached both apps (2 events); each of the 4 posts was handed to the
    // other bot only, never to its author (4 events).
    assert_eq!(feishu_events(&w), (6, 0));
    // Caid's turn heard snark's post as snark's, a bot's.
    let caid = w.model.requests_for("caid");
    assert!(caid[0].to_string().contains("over to you"), "{}", caid[0]);
    // A human speaking starts the chain over.
    human_mentions_snark(&w, 2, "again").await;
    w.gateway.settle().await;
    assert_eq!(w.feishu.posts().len(), 8);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_mention_only_bot_is_woken_by_a_siblings_mention_and_histories_hold_each_others_posts() {
    let w = world("websocket", &siblings_chat("mention")).await;
    w.model
        .script("snark", Step::reply("first thoughts: ship it"));
    w.model.script("caid", Step::reply("agreed, with tests"));
    w.model.script(
        "snark",
        Step::reply("<at user_id=\"cli_caid\">caid</at> anything to add?"),
    );
    w.model.script("caid", Step::reply("NO_REPLY"));

    // Snark's post mentions nobody: caid keeps it as history, and sees it when next woken.
    human_mentions(&w, 1, "snark", "please look").await;
    assert_eq!(w.model.requests_for("caid").len(), 0);
    human_mentions(&w, 2, "caid", "your view?").await;
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 1);
    assert!(
        caid[0].to_string().contains("first thoughts: ship it"),
        "{}",
        caid[0]
    );
    // And the other way round.
    human_mentions(&w, 3, "snark", "wrap up").await;
    let snark = w.model.requests_for("snark");
    assert_eq!(snark.len(), 2);
    assert!(
        snark[1].to_string().contains("agreed, with tests"),
        "{}",
        snark[1]
    );
    // Snark's last post @mentions caid (by its app id): caid is woken by it.
    w.gateway.settle().await;
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 2, "woken once more, by the mention");
    assert!(
        caid[1].to_string().contains("@caid anything to add?"),
        "{}",
        caid[1]
    );
    let apps: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
    assert_eq!(apps, ["snark", "caid", "snark"], "caid chose silence last");
    w.gateway.stop().await;
}

#[tokio::test]
async fn the_same_post_delivered_by_feishu_and_handed_over_is_one_event_in_both_orders() {
    // Baton first: the hand-over is filed when snark's post is recorded; Feishu's own copy (an
    // @mention, with the include_bot scope) comes later and is a duplicate.
    let w = world("websocket", &siblings_chat("mention")).await;
    let mention = "<at user_id=\"cli_caid\">caid</at> over to you";
    w.model.script("snark", Step::reply(mention));
    w.model.script("caid", Step::reply("NO_REPLY"));
    human_mentions_snark(&w, 1, "go").await;
    w.gateway.settle().await;
    assert_eq!(w.model.requests_for("caid").len(), 1);
    let posted = match &w.feishu.posts()[0].outcome {
        Outcome::Sent(id) => id.clone(),
        other => panic!("{other:?}"),
    };
    let before = feishu_events(&w);
    let mut copy = message_event(
        "caid",
        "ev-copy",
        &posted,
        GROUP,
        SNARK_IN_CAID,
        "@_user_1 over to you",
        &[(CAID, "caid")],
    );
    copy["event"]["sender"]["sender_type"] = "app".into();
    w.deliver("caid", &copy).await;
    assert_eq!(feishu_events(&w), (before.0, before.1 + 1), "a duplicate");
    assert_eq!(w.model.requests_for("caid").len(), 1, "answered once");
    w.gateway.stop().await;

    // Feishu first: the fake delivers the mention to caid, and caid has taken it, before
    // snark's post is answered; baton's hand-over then finds it taken.
    let w = world("websocket", &siblings_chat("mention")).await;
    w.feishu.deliver_bot_mentions();
    w.model.script("snark", Step::reply(mention));
    w.model.script("caid", Step::reply("NO_REPLY"));
    human_mentions_snark(&w, 1, "go").await;
    w.gateway.settle().await;
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 1, "answered once");
    assert!(
        caid[0].to_string().contains("(delivered by Feishu)"),
        "Feishu's copy is the one that ran, from snark: {}",
        caid[0]
    );
    // The human's message to both apps and Feishu's copy; baton's hand-over is a duplicate.
    assert_eq!(feishu_events(&w), (3, 1));
    assert_eq!(w.feishu.posts().len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_post_in_a_chat_the_other_bot_is_not_in_is_not_handed_over() {
    let w = world("websocket", "").await;
    w.model.script("snark", Step::reply("just between us"));
    w.model.script("snark", Step::reply("elsewhere"));
    // A direct chat: only snark is in it.
    let dm = message_event(
        "snark",
        "ev-dm",
        "om_dm",
        ("oc_dm", "p2p"),
        HUMAN_IN_SNARK,
        "hi",
        &[],
    );
    w.deliver("snark", &dm).await;
    // A group caid has left.
    w.feishu.not_in("caid", "oc_other");
    let elsewhere = message_event(
        "snark",
        "ev-o",
        "om_o",
        ("oc_other", "group"),
        HUMAN_IN_SNARK,
        "@_user_1 hi",
        &[(SNARK, "snark")],
    );
    w.deliver("snark", &elsewhere).await;
    assert_eq!(w.feishu.posts().len(), 2);
    assert!(w.feishu.in_chat_calls() >= 2, "caid was asked");
    assert_eq!(feishu_events(&w), (2, 0), "caid was handed nothing");
    w.gateway.stop().await;
}
