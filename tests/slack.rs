//! The Slack adapter end to end: a real gateway with two Slack apps (bots `snark` and `caid`)
//! talking to a fake Slack on 127.0.0.1 over Socket Mode and the Events API, and bots on a fake
//! model server. Every wait is on a condition with a deadline.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::chain_steps::on_chain;
use support::fake_openai::{FakeOpenAi, Step};
use support::fake_slack::{FakeSlack, event_body, events_envelope, signed_headers, unix_now};
use support::gateway::TestGateway;

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
    let (dir, db) = support::gateway::temp_db();
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

#[tokio::test]
async fn a_mention_gets_one_threaded_reply_from_the_mentioned_bot_with_its_own_token() {
    let w = world("socket", "").await;
    w.model.script("snark", Step::reply("hi from snark"));
    let ts = "1700000000.000100";
    let text = format!("<@{SNARK}> hello");
    let mention = event_body(
        "A_snark",
        "Ev1",
        "app_mention",
        said(HUMAN, "C1", ts, &text),
    );
    let message = event_body("A_snark", "Ev2", "message", said(HUMAN, "C1", ts, &text));
    let caid_copy = event_body("A_caid", "Ev3", "message", said(HUMAN, "C1", ts, &text));
    // Both events of the pair reach snark; caid (not mentioned) sees the message too.
    w.deliver("snark", events_envelope("env-1", 0, mention))
        .await;
    w.deliver("snark", events_envelope("env-2", 0, message))
        .await;
    w.deliver("caid", events_envelope("env-3", 0, caid_copy))
        .await;
    let posts = w.slack.posts();
    assert_eq!(
        posts.len(),
        1,
        "one reply for the pair, none from caid: {posts:?}"
    );
    assert_eq!(posts[0].token, "xoxb-snark");
    assert_eq!(posts[0].channel, "C1");
    assert_eq!(
        posts[0].thread_ts.as_deref(),
        Some(ts),
        "the reply goes in the thread"
    );
    assert_eq!(posts[0].text, "hi from snark");
    assert_eq!(w.model.requests_for("caid").len(), 0);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_redelivered_envelope_gets_no_second_reply() {
    let w = world("socket", "").await;
    let ts = "1700000000.000200";
    let body = event_body(
        "A_snark",
        "Ev9",
        "app_mention",
        said(HUMAN, "C1", ts, &format!("<@{SNARK}> once")),
    );
    w.deliver("snark", events_envelope("env-9", 0, body.clone()))
        .await;
    w.deliver("snark", events_envelope("env-9b", 1, body)).await;
    assert_eq!(w.slack.posts().len(), 1);
    assert_eq!(w.model.requests_for("snark").len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_reply_in_a_thread_stays_in_that_thread() {
    let w = world("socket", "").await;
    let mut event = said(
        HUMAN,
        "C1",
        "1700000000.000302",
        &format!("<@{SNARK}> in thread"),
    );
    event["thread_ts"] = "1700000000.000301".into();
    w.deliver(
        "snark",
        events_envelope(
            "env-t",
            0,
            event_body("A_snark", "EvT", "app_mention", event),
        ),
    )
    .await;
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].thread_ts.as_deref(), Some("1700000000.000301"));
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_429_then_success_is_exactly_one_post_after_retry_after() {
    let w = world("socket", "").await;
    w.slack.rate_limit_next(1);
    let started = std::time::Instant::now();
    let body = event_body(
        "A_snark",
        "Ev4",
        "app_mention",
        said(HUMAN, "C1", "1700000000.000400", &format!("<@{SNARK}> hi")),
    );
    w.deliver("snark", events_envelope("env-4", 0, body)).await;
    w.slack.wait_for(|s| !s.posts().is_empty()).await;
    assert_eq!(w.slack.all_posts().len(), 2, "one 429, one success");
    assert_eq!(w.slack.posts().len(), 1);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "waited Retry-After"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_9000_character_reply_is_three_ordered_posts_in_the_thread() {
    let w = world("socket", "").await;
    let long: String = (0..9000)
        .map(|i| char::from(b'a' + (i / 4000) as u8))
        .collect();
    w.model.script("snark", Step::reply(long.clone()));
    let ts = "1700000000.000500";
    let body = event_body(
        "A_snark",
        "Ev5",
        "app_mention",
        said(HUMAN, "C1", ts, &format!("<@{SNARK}> long")),
    );
    w.deliver("snark", events_envelope("env-5", 0, body)).await;
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 3);
    assert!(
        posts
            .iter()
            .all(|p| p.thread_ts.as_deref() == Some(ts) && p.token == "xoxb-snark")
    );
    assert!(posts.iter().all(|p| p.text.chars().count() <= 4000));
    let joined: String = posts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(joined, long, "chunks arrive in order");
    w.gateway.stop().await;
}

#[tokio::test]
async fn another_bots_message_wakes_a_bot_only_where_allow_bots_names_it() {
    let extra = "\n[[chats]]\nplatform = \"slack\"\nid = \"C_ALLOW\"\nallow_bots = [\"caid\"]\n";
    let w = world("socket", extra).await;
    for (n, channel) in ["C_DENY", "C_ALLOW"].into_iter().enumerate() {
        let ts = format!("1700000000.00060{n}");
        let mut event = said(CAID, channel, &ts, &format!("<@{SNARK}> over to you"));
        event["bot_id"] = "B_caid".into();
        let body = event_body("A_snark", &format!("EvB{n}"), "app_mention", event);
        w.deliver("snark", events_envelope(&format!("env-b{n}"), 0, body))
            .await;
    }
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].channel, "C_ALLOW");
    w.gateway.stop().await;
}

#[tokio::test]
async fn slash_command_over_socket_mode_is_refused_for_a_non_admin_and_works_for_an_admin() {
    let w = world("socket", "").await;
    for (n, (user, line)) in [
        (HUMAN, "help"),
        (ADMIN, "help"),
        (ADMIN, "status"),
        (ADMIN, "activation always"),
    ]
    .into_iter()
    .enumerate()
    {
        let envelope = json!({
            "envelope_id": format!("cmd-{n}"), "type": "slash_commands", "accepts_response_payload": true,
            "payload": { "token": "t", "team_id": "T1", "channel_id": "C1", "channel_name": "general",
                "user_id": user, "user_name": user, "command": "/baton", "text": line,
                "api_app_id": "A_snark", "response_url": w.slack.response_url(&format!("r{n}")),
                "trigger_id": format!("trig.{n}") }
        });
        w.deliver("snark", envelope).await;
    }
    w.slack.wait_for(|s| s.responses().len() == 4).await;
    let responses = w.slack.responses();
    assert_eq!(responses[0].0, "r0");
    assert!(
        responses[0].1.contains("Only baton admins"),
        "{responses:?}"
    );
    for (id, text) in &responses[1..] {
        assert!(!text.contains("Only baton admins"), "{id}: {text}");
    }
    assert!(
        responses[1].1.contains("status"),
        "help lists the commands: {}",
        responses[1].1
    );
    assert!(
        responses[3].1.contains("always"),
        "activation answered: {}",
        responses[3].1
    );
    assert!(
        w.slack.posts().is_empty(),
        "command answers are private, never posted"
    );
    assert_eq!(
        w.model.requests().len(),
        0,
        "no model turn for admin commands"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_disconnect_is_followed_by_a_reconnect_and_no_event_is_lost() {
    let w = world("socket", "").await;
    w.slack.push(
        "snark",
        &json!({"type": "disconnect", "reason": "refresh_requested",
        "debug_info": {"host": "fake"}}),
    );
    w.slack.wait_connected("snark", 2).await;
    let body = event_body(
        "A_snark",
        "Ev7",
        "app_mention",
        said(
            HUMAN,
            "C1",
            "1700000000.000700",
            &format!("<@{SNARK}> still there?"),
        ),
    );
    w.deliver("snark", events_envelope("env-7", 0, body)).await;
    assert_eq!(w.slack.posts().len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn events_api_refuses_bad_signatures_answers_challenges_and_ignores_retries() {
    let w = world("events", "").await;
    let ts = "1700000000.000800";
    let body = event_body(
        "A_snark",
        "EvH",
        "app_mention",
        said(HUMAN, "C1", ts, &format!("<@{SNARK}> over http")),
    )
    .to_string();
    let now = unix_now();
    assert_eq!(w.hook(&body, vec![], false).await, 401, "unsigned");
    let mut bad = signed_headers(SECRET, now, &body);
    bad[1].1 = signed_headers("wrong-secret", now, &body)[1].1.clone();
    assert_eq!(w.hook(&body, bad, false).await, 401, "badly signed");
    assert_eq!(
        w.hook(&body, signed_headers(SECRET, now - 301, &body), false)
            .await,
        401,
        "stale"
    );
    // Correctly signed, but not an Events API payload: malformed, refused, nothing recorded.
    let array = json!([json!({"type": "event_callback"}), body.clone()]).to_string();
    for odd in [array.as_str(), "\"event_callback\"", "42"] {
        assert_eq!(
            w.hook(odd, signed_headers(SECRET, unix_now(), odd), false)
                .await,
            400,
            "{odd}"
        );
    }
    assert!(w.slack.all_posts().is_empty());
    assert_eq!(w.model.requests().len(), 0);
    let metrics = w.gateway.gateway.dispatcher().shared().metrics();
    assert_eq!(metrics.get(&baton::metrics::EVENTS_IN, "slack"), 0);

    let challenge = json!({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}).to_string();
    let response = w
        .gateway
        .http
        .post(format!("{}/hooks/slack/snark", w.gateway.base))
        .header("content-type", "application/json")
        .headers(
            signed_headers(SECRET, now, &challenge)
                .into_iter()
                .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                .collect(),
        )
        .body(challenge.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );

    // The account answers once auth.test has told it who it is; Slack retries a 503 meanwhile.
    let mut status = 0;
    for _ in 0..200 {
        status = w
            .hook(&body, signed_headers(SECRET, unix_now(), &body), false)
            .await;
        if status != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
    w.slack.wait_for(|s| s.posts().len() == 1).await;
    let mut retry = signed_headers(SECRET, unix_now(), &body);
    retry.push(("x-slack-retry-num", "1".into()));
    retry.push(("x-slack-retry-reason", "http_timeout".into()));
    assert_eq!(w.hook(&body, retry, false).await, 200);
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "the retry is a duplicate");
    assert_eq!(posts[0].thread_ts.as_deref(), Some(ts));
    assert_eq!(posts[0].token, "xoxb-snark");

    // Slash command over HTTP: form-encoded and signed.
    let form = |user: &str, id: &str| {
        format!(
            "token=t&team_id=T1&channel_id=C1&channel_name=general&user_id={user}&user_name=x\
             &command=%2Fbaton&text=status&api_app_id=A_snark&response_url={}&trigger_id=trig.{id}",
            url_encode(&w.slack.response_url(id))
        )
    };
    let refused = form(HUMAN, "h1");
    assert_eq!(
        w.hook(&refused, signed_headers(SECRET, unix_now(), &refused), true)
            .await,
        200
    );
    let allowed = form(ADMIN, "h2");
    assert_eq!(
        w.hook(&allowed, vec![], true).await,
        401,
        "unsigned command"
    );
    assert_eq!(
        w.hook(&allowed, signed_headers(SECRET, unix_now(), &allowed), true)
            .await,
        200
    );
    w.slack.wait_for(|s| s.responses().len() == 2).await;
    let responses = w.slack.responses();
    assert!(
        responses
            .iter()
            .any(|(id, t)| id == "h1" && t.contains("Only baton admins"))
    );
    assert!(
        responses
            .iter()
            .any(|(id, t)| id == "h2" && !t.contains("Only baton admins"))
    );
    w.gateway.stop().await;
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn a_chain_started_in_a_channel_posts_each_turn_with_its_bots_token_in_one_thread() {
    let bots = ["snark", "caid", "sec", "doc"];
    let w = world_of(
        &bots,
        "tools = [\"chain_*\"]",
        "socket",
        "\n[chains]\ncoordinator = \"snark\"\n",
    )
    .await;
    for (bot, prompt) in [
        ("caid", "Risks?"),
        ("sec", "Mitigations?"),
        ("doc", "Write it up."),
    ] {
        w.model.script(
            "snark",
            on_chain("chain_pass", json!({"bot": bot, "prompt": prompt})),
        );
        w.model.script("snark", Step::reply("NO_REPLY"));
        w.model
            .script(bot, Step::reply(format!("{bot} says: {prompt}")));
    }
    w.model.script("snark", on_chain("chain_close", json!({})));
    w.model.script("snark", Step::reply("NO_REPLY"));

    let ts = "1700000000.000900";
    let text = "/baton chain start <@U_CAID> <@U_SEC> <@U_DOC> plan the launch";
    let body = event_body("A_snark", "EvC", "message", said(ADMIN, "C1", ts, text));
    w.deliver("snark", events_envelope("env-c", 0, body)).await;

    let posts = w.slack.posts();
    let turns: Vec<(String, String)> = posts
        .iter()
        .filter(|p| p.text.contains(" says: "))
        .map(|p| (p.token.clone(), p.text.clone()))
        .collect();
    assert_eq!(
        turns,
        [
            ("xoxb-caid".to_owned(), "caid says: Risks?".to_owned()),
            ("xoxb-sec".to_owned(), "sec says: Mitigations?".to_owned()),
            ("xoxb-doc".to_owned(), "doc says: Write it up.".to_owned()),
        ],
        "each turn under its own bot's token, in order: {posts:#?}"
    );
    assert!(
        posts
            .iter()
            .all(|p| p.channel == "C1" && p.thread_ts.as_deref() == Some(ts)),
        "everything in the thread under the command: {posts:#?}"
    );
    assert!(posts[0].text.starts_with("Started chain ch-"), "{posts:#?}");
    assert!(
        posts.last().unwrap().text.contains("completed"),
        "{posts:#?}"
    );
    w.gateway.stop().await;
}

/// The pairing code in a bot's pairing notice.
fn code_in(text: &str) -> String {
    let at = text.find("approve ").expect("a code in the notice") + "approve ".len();
    text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect()
}

#[tokio::test]
async fn dm_pairing_issues_one_code_an_admin_approves_and_an_expired_code_fails_clearly() {
    let extra = "\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"pairing\"\n";
    let w = world("socket", extra).await;
    let dm = |user: &str, n: u32, text: &str| {
        let ts = format!("1700000001.0000{n:02}");
        let mut event = said(user, &format!("D_{user}"), &ts, text);
        event["channel_type"] = "im".into();
        events_envelope(
            &format!("dm-{n}"),
            0,
            event_body("A_snark", &format!("EvD{n}"), "message", event),
        )
    };
    let admin_says = |n: u32, text: &str| {
        let ts = format!("1700000002.0000{n:02}");
        let event = said(ADMIN, "C1", &ts, text);
        events_envelope(
            &format!("adm-{n}"),
            0,
            event_body("A_snark", &format!("EvA{n}"), "message", event),
        )
    };

    w.deliver("snark", dm("U_STRANGER", 1, "hi")).await;
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].channel, "D_U_STRANGER");
    let code = code_in(&posts[0].text);
    assert_eq!(code.len(), 8, "{}", posts[0].text);
    assert_eq!(w.model.requests().len(), 0, "nothing else: no model turn");

    // A second DM within the hour: no new code, no second notice (rate-limited).
    w.deliver("snark", dm("U_STRANGER", 2, "hello?")).await;
    assert_eq!(w.slack.posts().len(), 1);
    let pairings = w.gateway.gateway.store().pairings().await.unwrap();
    assert_eq!(pairings.len(), 1);
    assert_eq!(pairings[0].code, code);

    w.deliver(
        "snark",
        admin_says(1, &format!("/baton pairing approve {code}")),
    )
    .await;
    let approved = w.slack.posts().last().unwrap().text.clone();
    assert!(
        approved.starts_with("Approved U_STRANGER on slack"),
        "{approved}"
    );

    w.model.script("snark", Step::reply("welcome in"));
    w.deliver("snark", dm("U_STRANGER", 3, "hi again")).await;
    let last = w.slack.posts().last().unwrap().clone();
    assert_eq!(
        (last.channel.as_str(), last.text.as_str()),
        ("D_U_STRANGER", "welcome in")
    );

    // A code not approved within the hour fails clearly, and the sender gets a new one.
    w.deliver("snark", dm("U_LATE", 4, "hi")).await;
    let old = code_in(&w.slack.posts().last().unwrap().text);
    let db = rusqlite::Connection::open(&w.db).unwrap();
    db.execute(
        "UPDATE pairing SET created_ms = created_ms - 3600001 WHERE user = 'U_LATE'",
        [],
    )
    .unwrap();
    w.deliver(
        "snark",
        admin_says(2, &format!("/baton pairing approve {old}")),
    )
    .await;
    let expired = w.slack.posts().last().unwrap().text.clone();
    assert!(
        expired.contains(&format!("Code {old}")) && expired.contains("has expired"),
        "{expired}"
    );
    let audit = w.gateway.gateway.store().audit_log(10).await.unwrap();
    assert_eq!(audit[0].command, format!("/baton pairing approve {old}"));
    assert!(
        audit[0].outcome.starts_with("error: Code"),
        "{:?}",
        audit[0]
    );
    assert_eq!(audit[1].outcome, "ok", "the first approval is audited too");
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_chain_started_by_slash_command_is_announced_and_its_posts_thread_under_the_announcement()
{
    let w = world("socket", "").await;
    w.model.script("caid", Step::reply("caid was here"));
    let envelope = json!({
        "envelope_id": "cmd-chain", "type": "slash_commands", "accepts_response_payload": true,
        "payload": { "token": "t", "team_id": "T1", "channel_id": "C1", "channel_name": "general",
            "user_id": ADMIN, "user_name": "admin", "command": "/baton",
            "text": "chain start @caid quick check",
            "api_app_id": "A_snark", "response_url": w.slack.response_url("rc"),
            "trigger_id": "trig.chain" }
    });
    w.deliver("snark", envelope).await;

    let responses = w.slack.responses();
    assert_eq!(responses.len(), 1, "{responses:?}");
    assert!(
        responses[0].1.starts_with("Started chain ch-"),
        "{responses:?}"
    );
    let posts = w.slack.posts();
    assert_eq!(
        posts.len(),
        3,
        "announcement, caid's post, the ending: {posts:#?}"
    );
    let (announcement, post, ending) = (&posts[0], &posts[1], &posts[2]);
    assert!(announcement.text.starts_with("Chain ch-"), "{posts:#?}");
    assert_eq!(
        announcement.thread_ts, None,
        "the announcement is in the channel"
    );
    assert_eq!(
        (post.token.as_str(), post.text.as_str()),
        ("xoxb-caid", "caid was here")
    );
    // The fake numbers its posts from 1700000000.000101: the announcement is the first.
    assert_eq!(
        post.thread_ts.as_deref(),
        Some("1700000000.000101"),
        "{posts:#?}"
    );
    assert_eq!(
        post.thread_ts, ending.thread_ts,
        "one thread under the announcement"
    );
    assert!(ending.text.contains("completed"), "{posts:#?}");
    w.gateway.stop().await;
}
