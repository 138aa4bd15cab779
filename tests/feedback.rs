//! What people see while a bot works, on Slack, Discord and Feishu: a real gateway whose bot
//! sits on a fake platform, with a fake model that writes its reply slowly. Every assertion is
//! on what the fake platform saw (posts, edits, the typing indicator), in the order it saw them.

mod support;

use std::path::Path;
use std::time::Duration;

use baton::metrics::EVENTS_IN;
use serde_json::Value;
use support::fake_discord::FakeDiscord;
use support::fake_feishu::{FakeFeishu, message_event};
use support::fake_openai::{FakeOpenAi, Step};
use support::fake_slack::{FakeSlack, event_body, events_envelope};
use support::gateway::{DEADLINE, TestGateway};
use support::seen::{Seen, Timeline};

/// A reply long enough to stream: about 240 characters.
const REPLY: &str = "Here is what I found. The build broke because the lock file pins an old \
                     version of the parser, and the new grammar needs the newer one. Bump it, run \
                     the tests again, and the whole suite should pass in a few minutes.";

/// Short intervals so a test streams within a second or two.
const FEEDBACK: &str = "\n[feedback]\nedit_interval_ms = 150\nstream_min_chars = 40\n";

/// The model writes `text` 8 characters every 40 ms (about 1.2 s for [`REPLY`]).
fn slowly(text: &str) -> Step {
    Step::slow(text, 8, Duration::from_millis(40))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    Slack,
    Discord,
    Feishu,
}

const SLACK_BOT: &str = "U_SNARK";
const DISCORD_BOT: &str = "100000000000000001";
const DISCORD_CHANNEL: &str = "300000000000000001";
const FEISHU_BOT: &str = "ou_snark_self";

/// The platform side of a world.
enum Fake {
    Slack(FakeSlack),
    Discord(FakeDiscord),
    Feishu(FakeFeishu),
}

/// One bot, `snark`, on one fake platform, answering from a fake model.
struct World {
    on: On,
    model: FakeOpenAi,
    fake: Fake,
    gateway: TestGateway,
    _db: tempfile::TempDir,
    sent: std::cell::Cell<u32>,
}

fn env(name: &str) -> Option<String> {
    Some(
        match name {
            "SNARK_SLACK_APP_TOKEN" => "xapp-snark",
            "SNARK_SLACK_BOT_TOKEN" => "xoxb-snark",
            "SNARK_DISCORD_TOKEN" => "token-snark",
            "SNARK_FEISHU_APP_SECRET" => "secret-snark",
            _ => return None,
        }
        .to_owned(),
    )
}

async fn world(on: On, extra: &str) -> World {
    world_with(on, "", extra).await
}

/// [`world`], with `gateway` lines added to its `[gateway]` table.
async fn world_with(on: On, gateway: &str, extra: &str) -> World {
    let model = FakeOpenAi::start().await;
    let (fake, account, chat) = match on {
        On::Slack => {
            let slack = FakeSlack::start().await;
            slack.app("snark", SLACK_BOT);
            let account = format!(
                "platform = \"slack\"\nmode = \"socket\"\napp_token_env = \"SNARK_SLACK_APP_TOKEN\"\n\
                 bot_token_env = \"SNARK_SLACK_BOT_TOKEN\"\napi_url = \"{}\"\n",
                slack.api_url
            );
            (Fake::Slack(slack), account, "C1")
        }
        On::Discord => {
            let discord = FakeDiscord::start().await;
            discord.bot("token-snark", DISCORD_BOT, "snark");
            let account = format!(
                "platform = \"discord\"\nbot_token_env = \"SNARK_DISCORD_TOKEN\"\n\
                 application_id = \"{DISCORD_BOT}\"\napi_url = \"{}\"\n",
                discord.api_url
            );
            (Fake::Discord(discord), account, DISCORD_CHANNEL)
        }
        On::Feishu => {
            let feishu = FakeFeishu::start().await;
            feishu.app("snark", FEISHU_BOT);
            let account = format!(
                "platform = \"feishu\"\nmode = \"websocket\"\napp_id = \"cli_snark\"\n\
                 app_secret_env = \"SNARK_FEISHU_APP_SECRET\"\napi_url = \"{}\"\n",
                feishu.api_url
            );
            (Fake::Feishu(feishu), account, "oc_group")
        }
    };
    let platform = match on {
        On::Slack => "slack",
        On::Discord => "discord",
        On::Feishu => "feishu",
    };
    let extra = extra
        .replace("{platform}", platform)
        .replace("{chat}", chat);
    let text = format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n{gateway}\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
         [[accounts]]\nbot = \"snark\"\n{account}\n{extra}",
        model.base_url
    );
    let (dir, db) = support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    match &fake {
        Fake::Slack(slack) => slack.wait_connected("snark", 1).await,
        Fake::Discord(discord) => {
            discord
                .wait_for("snark identified", |d| d.connected(DISCORD_BOT))
                .await
        }
        Fake::Feishu(feishu) => feishu.wait_connected("snark", 1).await,
    }
    let w = World {
        on,
        model,
        fake,
        gateway,
        _db: dir,
        sent: std::cell::Cell::new(0),
    };
    w.wait_ready().await;
    w
}

impl World {
    async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
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
            assert!(tokio::time::Instant::now() < deadline, "never ready");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn seen(&self) -> Timeline {
        match &self.fake {
            Fake::Slack(slack) => slack.seen(),
            Fake::Discord(discord) => discord.seen(),
            Fake::Feishu(feishu) => feishu.seen(),
        }
    }

    fn events_in(&self) -> u64 {
        let platform = match self.on {
            On::Slack => "slack",
            On::Discord => "discord",
            On::Feishu => "feishu",
        };
        self.gateway
            .gateway
            .dispatcher()
            .shared()
            .metrics()
            .get(&EVENTS_IN, platform)
    }

    /// A human says `words` in the group chat, @mentioning the bot when `mention`; returns once
    /// the gateway has taken the message (the turn may still run).
    async fn say(&self, words: &str, mention: bool) {
        let n = self.sent.get() + 1;
        self.sent.set(n);
        let before = self.events_in();
        match &self.fake {
            Fake::Slack(slack) => {
                let text = if mention {
                    format!("<@{SLACK_BOT}> {words}")
                } else {
                    words.to_owned()
                };
                let ts = format!("1700000000.{n:06}");
                let event = serde_json::json!({ "user": "U_HUMAN", "text": text, "ts": ts,
                    "channel": "C1", "event_ts": ts, "channel_type": "channel" });
                let kind = if mention { "app_mention" } else { "message" };
                let body = event_body("A_snark", &format!("Ev{n}"), kind, event);
                slack.push("snark", &events_envelope(&format!("env-{n}"), 0, body));
            }
            Fake::Discord(discord) => {
                let text = if mention {
                    format!("<@{DISCORD_BOT}> {words}")
                } else {
                    words.to_owned()
                };
                discord.say(
                    ("200000000000000001", "mason"),
                    DISCORD_CHANNEL,
                    &text,
                    None,
                );
            }
            Fake::Feishu(feishu) => {
                let (text, mentions) = if mention {
                    (format!("@_user_1 {words}"), vec![(FEISHU_BOT, "snark")])
                } else {
                    (words.to_owned(), vec![])
                };
                let event = message_event(
                    "snark",
                    &format!("ev_{n}"),
                    &format!("om_human_{n}"),
                    ("oc_group", "group"),
                    "ou_human",
                    &text,
                    &mentions,
                );
                feishu.push_event("snark", &event);
            }
        }
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while self.events_in() == before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the gateway never took the message"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Wait until what the platform saw meets `cond`.
    async fn wait_seen(&self, what: &str, cond: impl Fn(&Timeline) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !cond(&self.seen()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:?}: never saw {what}: {:?}",
                self.on,
                self.seen().all()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A human @mentions the bot and the turn runs to its end.
    async fn ask(&self, words: &str) {
        self.say(words, true).await;
        self.gateway.settle().await;
    }
}

/// The transcript of the world's one session.
async fn only_transcript(w: &World) -> Vec<Value> {
    let sessions = w.gateway.get("/api/sessions").await;
    let key = sessions[0]["key"].as_str().expect("a session").to_owned();
    w.gateway.transcript(&key).await
}

/// What streaming must look like on any platform: the first post well before the model
/// finished, edits that only ever add to the text, and posts that end up holding the reply.
fn assert_streamed(w: &World, reply: &str) {
    let seen = w.seen();
    let finished = *w.model.finished().first().expect("the model finished");
    let first = seen.first_post_at().expect("a post");
    assert!(
        first + Duration::from_millis(300) < finished,
        "{:?}: the first post came {:?} before the model finished; it should be well before",
        w.on,
        finished.saturating_duration_since(first)
    );
    assert!(
        seen.edits() >= 2,
        "{:?}: the reply was not edited in: {:?}",
        w.on,
        seen.all()
    );
    assert_eq!(seen.shown(), [reply], "{:?}: what the chat shows", w.on);
    let texts = seen.texts();
    for pair in texts.windows(2) {
        assert!(
            pair[1].starts_with(&pair[0]),
            "{:?}: an edit took text back or came out of order: {pair:?}",
            w.on
        );
    }
}

/// Typing went up for the turn and came down again, as the platform allows: Discord has no
/// way to take it down (it ends when the bot posts), so only up there.
fn assert_typing_ended(w: &World) {
    let seen = w.seen();
    let (on, off) = seen.typing();
    assert!(on >= 1, "{:?}: no typing indicator: {:?}", w.on, seen.all());
    if w.on == On::Discord {
        return;
    }
    assert_eq!(
        off,
        on,
        "{:?}: typing not taken down: {:?}",
        w.on,
        seen.all()
    );
}

/// The indicator stayed up until the reply was complete.
fn assert_typing_outlived_the_reply(w: &World) {
    if w.on == On::Discord {
        return;
    }
    let all = w.seen().all();
    let last_text = all
        .iter()
        .rposition(|s| matches!(s, Seen::Post { .. } | Seen::Edit { .. }));
    let last_off = all
        .iter()
        .rposition(|s| matches!(s, Seen::TypingOff { .. }));
    assert!(
        last_text.is_none() || last_off > last_text,
        "{:?}: typing ended before the reply was complete: {all:?}",
        w.on
    );
}

async fn streams_a_slow_reply(on: On) {
    let w = world(on, FEEDBACK).await;
    w.model.script("snark", slowly(REPLY));
    let asked = tokio::time::Instant::now();
    w.ask("why did the build break?").await;
    // For BENCHMARKS.md (printed with --nocapture; never asserted on).
    let seen = w.seen();
    let ms = |at: Option<tokio::time::Instant>| at.map(|at| (at - asked).as_millis());
    eprintln!(
        "latency {on:?}: first visible text {:?} ms, whole reply shown {:?} ms, model done {:?} ms",
        ms(seen.first_post_at()),
        ms(seen.last_text_at()),
        ms(w.model.finished().first().copied()),
    );
    assert_streamed(&w, REPLY);
    assert_typing_outlived_the_reply(&w);
    assert_typing_ended(&w);
    // The request asked for a stream with usage.
    let request = &w.model.requests_for("snark")[0];
    assert_eq!(request["stream"], true);
    assert_eq!(request["stream_options"]["include_usage"], true);
    // The transcript holds the final text, with the post's platform id.
    let session = only_transcript(&w).await;
    let replies: Vec<&Value> = session.iter().filter(|e| e["kind"] == "reply").collect();
    assert_eq!(replies.len(), 1, "{session:?}");
    assert_eq!(replies[0]["text"], REPLY);
    assert!(
        replies[0]["platform_message_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_streams_a_slow_reply_by_editing_its_post() {
    streams_a_slow_reply(On::Slack).await;
}

#[tokio::test]
async fn discord_streams_a_slow_reply_by_editing_its_post() {
    streams_a_slow_reply(On::Discord).await;
}

#[tokio::test]
async fn feishu_streams_a_slow_reply_by_editing_its_post() {
    streams_a_slow_reply(On::Feishu).await;
}

/// A silent turn shows nothing; a reply that ends with the token never shows a piece of it.
async fn the_silent_token_never_shows(on: On) {
    let w = world(on, FEEDBACK).await;
    w.model.script(
        "snark",
        Step::slow("NO_REPLY", 2, Duration::from_millis(60)),
    );
    w.ask("anything to add?").await;
    assert_eq!(w.seen().posts(), 0, "{on:?}: a silent turn posted");
    assert_eq!(w.seen().edits(), 0, "{on:?}: a silent turn edited");
    assert_typing_ended(&w);

    let trailing = format!("{REPLY}\n\nNO_REPLY");
    w.model.script("snark", slowly(&trailing));
    w.ask("and now?").await;
    let texts = w.seen().texts();
    assert!(!texts.is_empty(), "{on:?}: nothing posted");
    for text in &texts {
        for cut in 1..="NO_REPLY".len() {
            assert!(
                !text.ends_with(&"NO_REPLY"[..cut]) || REPLY.ends_with(&"NO_REPLY"[..cut]),
                "{on:?}: a piece of the token was shown: {text:?}"
            );
        }
        assert!(!text.contains("NO_R"), "{on:?}: {text:?}");
    }
    assert_eq!(w.seen().shown(), [REPLY], "{on:?}");
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_never_shows_the_silent_token() {
    the_silent_token_never_shows(On::Slack).await;
}

#[tokio::test]
async fn discord_never_shows_the_silent_token() {
    the_silent_token_never_shows(On::Discord).await;
}

#[tokio::test]
async fn feishu_never_shows_the_silent_token() {
    the_silent_token_never_shows(On::Feishu).await;
}

/// A failed turn ends its typing too; an `always` bot nobody addressed shows no typing.
async fn typing_follows_the_turn(on: On) {
    let always =
        "\n[[chats]]\nplatform = \"{platform}\"\nid = \"{chat}\"\nactivation = \"always\"\n";
    let w = world(on, &format!("{FEEDBACK}{always}")).await;
    w.model.script(
        "snark",
        Step::Error {
            status: 400,
            retry_after: None,
        },
    );
    w.ask("this one fails").await;
    assert_typing_ended(&w);
    let before = w.seen().typing();

    w.model.script(
        "snark",
        Step::slow("NO_REPLY", 4, Duration::from_millis(30)),
    );
    w.say("just chatting among ourselves", false).await;
    w.gateway.settle().await;
    assert_eq!(
        w.model.requests_for("snark").len(),
        2,
        "the always bot took its turn"
    );
    assert_eq!(
        w.seen().typing(),
        before,
        "{on:?}: typing for an always turn nobody addressed"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_typing_ends_with_a_failed_turn_and_never_shows_for_an_unaddressed_one() {
    typing_follows_the_turn(On::Slack).await;
}

#[tokio::test]
async fn discord_typing_ends_with_a_failed_turn_and_never_shows_for_an_unaddressed_one() {
    typing_follows_the_turn(On::Discord).await;
}

#[tokio::test]
async fn feishu_typing_ends_with_a_failed_turn_and_never_shows_for_an_unaddressed_one() {
    typing_follows_the_turn(On::Feishu).await;
}

/// A turn that fails after its reply began to stream: the post it made ends with the error
/// reply, under the text shown so far; nothing is posted a second time.
#[tokio::test]
async fn a_turn_that_fails_mid_stream_ends_its_post_with_the_error_reply() {
    const SORRY: &str = "Sorry, that went wrong; please ask again.";
    let gateway = format!("turn_timeout_seconds = 1\nerror_reply = \"{SORRY}\"\n");
    let w = world_with(On::Slack, &gateway, FEEDBACK).await;
    // About 3 s of writing: the turn is cut off at 1 s, with part of the reply shown.
    w.model
        .script("snark", Step::slow(REPLY, 8, Duration::from_millis(100)));
    w.ask("why did the build break?").await;
    let seen = w.seen();
    assert_eq!(seen.posts(), 1, "{:?}", seen.all());
    let shown = seen.shown();
    let (partial, error) = shown[0]
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("the post does not end with the error reply: {shown:?}"));
    assert_eq!(error, SORRY);
    assert!(
        !partial.is_empty() && partial.len() < REPLY.len() && REPLY.starts_with(partial),
        "{partial:?}"
    );
    assert_typing_ended(&w);
    let session = only_transcript(&w).await;
    assert!(
        session.iter().any(|e| e["kind"] == "failure"),
        "{session:?}"
    );
    let replies: Vec<&Value> = session.iter().filter(|e| e["kind"] == "reply").collect();
    assert_eq!(replies.len(), 1, "{session:?}");
    assert_eq!(
        replies[0]["text"],
        shown[0].as_str(),
        "the post's final text"
    );
    w.gateway.stop().await;
}

/// The id of the post that ended up showing `text`, and every text it showed, in order.
fn post_showing(seen: &Timeline, text: &str) -> (String, Vec<String>) {
    let all = seen.all();
    let mut texts: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in &all {
        if let Seen::Post { id, text } | Seen::Edit { id, text } = s {
            texts.entry(id.clone()).or_default().push(text.clone());
        }
    }
    texts
        .into_iter()
        .find(|(_, shown)| shown.last().map(String::as_str) == Some(text))
        .unwrap_or_else(|| panic!("no post shows {text:?}: {all:?}"))
}

/// A chain turn answers into the chat like a mention: typing while it runs, and its reply
/// streamed in by editing its post, the first text well before the model finished.
#[tokio::test]
async fn a_chain_turn_shows_typing_and_streams_its_reply_by_edits() {
    let admins = "\n[admins]\nslack = [\"U_HUMAN\"]\n";
    let w = world(On::Slack, &format!("{FEEDBACK}{admins}")).await;
    w.model.script("snark", slowly(REPLY));
    w.say("/baton chain start @snark why did the build break", true)
        .await;
    w.wait_seen("the chain's closing line", |seen| {
        seen.shown().iter().any(|t| t.contains("completed"))
    })
    .await;
    w.gateway.settle().await;
    let seen = w.seen();
    let (_, shown) = post_showing(&seen, REPLY);
    assert!(
        shown.len() >= 3,
        "the chain turn's reply was not streamed in: {shown:?}"
    );
    for pair in shown.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "out of order: {pair:?}");
    }
    let first = seen.first_post_at().expect("posts");
    let finished = *w.model.finished().first().expect("the model finished");
    assert!(
        first < finished,
        "nothing was shown before the model finished"
    );
    let (on, off) = seen.typing();
    assert!(on >= 1, "no typing for the chain turn: {:?}", seen.all());
    assert_eq!(on, off, "typing not taken down: {:?}", seen.all());
    assert_typing_outlived_the_reply_post(&seen);
    // The chain took the streamed reply as its post.
    let chains = w.gateway.get("/api/chains").await;
    let id = chains["chains"][0]["id"]
        .as_str()
        .expect("a chain")
        .to_owned();
    let chain = w.gateway.get(&format!("/api/chains/{id}")).await;
    let posts: Vec<&Value> = chain["messages"]
        .as_array()
        .expect("the chain's log")
        .iter()
        .filter(|m| m["kind"] == "message")
        .collect();
    assert_eq!(posts.len(), 1, "{chain}");
    assert_eq!(posts[0]["content"], REPLY);
    w.gateway.stop().await;
}

/// The typing indicator came down only after the last edit of a reply.
fn assert_typing_outlived_the_reply_post(seen: &Timeline) {
    let all = seen.all();
    let last_edit = all.iter().rposition(|s| matches!(s, Seen::Edit { .. }));
    let last_off = all
        .iter()
        .rposition(|s| matches!(s, Seen::TypingOff { .. }));
    assert!(
        last_off > last_edit,
        "typing ended before the reply: {all:?}"
    );
}

#[tokio::test]
async fn a_reply_longer_than_discords_limit_streams_into_several_posts_at_boundaries() {
    let w = world(On::Discord, FEEDBACK).await;
    let paragraph = format!("{REPLY}\n\n");
    let long = paragraph.repeat(11).trim_end().to_owned(); // about 2,700 characters
    w.model
        .script("snark", Step::slow(&long, 120, Duration::from_millis(40)));
    w.ask("tell me everything").await;
    let expected = baton::deliver::split(&long, 2000);
    assert_eq!(expected.len(), 2);
    assert_eq!(
        w.seen().shown(),
        expected,
        "the posts hold the reply in order"
    );
    for text in w.seen().texts() {
        assert!(text.chars().count() <= 2000, "over Discord's limit");
    }
    w.gateway.stop().await;
}

#[tokio::test]
async fn an_edit_refused_with_429_is_sent_again_after_retry_after_in_order() {
    let w = world(On::Slack, FEEDBACK).await;
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    slack.rate_limit_updates(1);
    w.model
        .script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    w.ask("slowly please").await;
    assert_streamed(&w, REPLY);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_slack_app_without_the_status_scope_streams_without_typing() {
    let w = world(On::Slack, FEEDBACK).await;
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    slack.without_status_scope();
    w.model.script("snark", slowly(REPLY));
    w.ask("no scope here").await;
    assert_eq!(w.seen().typing(), (0, 0));
    assert_streamed(&w, REPLY);
    w.gateway.stop().await;
}

#[tokio::test]
async fn stream_off_posts_the_whole_reply_once() {
    let w = world(
        On::Slack,
        "\n[feedback]\nstream = \"off\"\ntyping = false\n",
    )
    .await;
    w.model.script("snark", slowly(REPLY));
    let asked = tokio::time::Instant::now();
    w.ask("all at once").await;
    eprintln!(
        "latency Slack, stream off: first visible text {:?} ms",
        w.seen().first_post_at().map(|at| (at - asked).as_millis())
    );
    let all = w.seen().all();
    assert!(
        matches!(all.as_slice(), [Seen::Post { text, .. }] if text == REPLY),
        "{all:?}"
    );
    assert_ne!(w.model.requests_for("snark")[0]["stream"], true);
    w.gateway.stop().await;
}

/// The real binary, killed with SIGKILL while a reply streams into Slack: at the next start
/// the unfinished turn runs again and finishes the reply in the post it had made, never
/// posting it a second time; the transcript holds the post once, with its final text.
#[tokio::test]
async fn a_kill_mid_stream_never_posts_the_reply_twice() {
    use support::fake_slack::{signed_headers, unix_now};
    use support::process::{EXIT_DEADLINE, Running, baton, eventually};

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", SLACK_BOT);
    // One reply for the killed attempt, one for the replay.
    model.script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    model.script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let db = dir.path().join("baton.db");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
             [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n{FEEDBACK}\n\
             [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"events\"\n\
             bot_token_env = \"SNARK_SLACK_BOT_TOKEN\"\nsigning_secret_env = \"SNARK_SLACK_SIGNING_SECRET\"\n\
             api_url = \"{}\"\n",
            model.base_url, slack.api_url
        ),
    )
    .unwrap();
    let start = || {
        let mut cmd = baton(dir.path());
        cmd.arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--database")
            .arg(&db)
            .env("SNARK_SLACK_BOT_TOKEN", "xoxb-snark")
            .env("SNARK_SLACK_SIGNING_SECRET", SECRET);
        Running::spawn(cmd)
    };
    let http = reqwest::Client::new();
    let reply_entries = |base: String| {
        let http = http.clone();
        async move {
            let sessions: Value = http
                .get(format!("{base}/api/sessions"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let key = sessions[0]["key"].as_str()?.to_owned();
            let transcript: Vec<Value> = http
                .get(format!("{base}/api/transcript"))
                .query(&[("session", key)])
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            Some(
                transcript
                    .into_iter()
                    .filter(|e| e["kind"] == "reply")
                    .collect::<Vec<_>>(),
            )
        }
    };

    let ready = |base: String| {
        let http = http.clone();
        async move {
            let status = http
                .get(format!("{base}/readyz"))
                .send()
                .await
                .ok()?
                .status();
            (status == 200).then_some(())
        }
    };
    let (mut first, out) = start();
    let base = first.base_url(out).await;
    eventually(DEADLINE, "the gateway ready", || ready(base.clone())).await;
    let event = serde_json::json!({ "user": "U_HUMAN", "text": format!("<@{SLACK_BOT}> why?"),
        "ts": "1700000000.000001", "channel": "C1", "event_ts": "1700000000.000001",
        "channel_type": "channel" });
    let body = event_body("A_snark", "Ev1", "app_mention", event).to_string();
    let mut request = http
        .post(format!("{base}/hooks/slack/snark"))
        .header("content-type", "application/json")
        .body(body.clone());
    for (k, v) in signed_headers(SECRET, unix_now(), &body) {
        request = request.header(k, v);
    }
    assert_eq!(request.send().await.unwrap().status(), 200);
    // Killed once the first streamed post is made and on record, long before the reply is done.
    eventually(DEADLINE, "the first streamed post on record", || {
        let entries = reply_entries(base.clone());
        async move { entries.await.filter(|e| !e.is_empty()) }
    })
    .await;
    first.kill();
    first.wait(EXIT_DEADLINE).await;
    assert_eq!(slack.seen().posts(), 1);
    assert_ne!(
        slack.seen().shown(),
        [REPLY],
        "killed too late to test anything"
    );

    let (mut second, out) = start();
    let base = second.base_url(out).await;
    slack.wait_for(|s| s.seen().shown() == [REPLY]).await;
    assert_eq!(
        slack.seen().posts(),
        1,
        "posted twice: {:?}",
        slack.seen().all()
    );
    let entries = eventually(DEADLINE, "the reply's final text on record", || {
        let entries = reply_entries(base.clone());
        async move {
            entries
                .await
                .filter(|e| e.len() == 1 && e[0]["text"] == REPLY)
        }
    })
    .await;
    assert!(entries[0]["platform_message_id"].as_str().is_some());
    second.terminate();
    second.wait(EXIT_DEADLINE).await;
}

/// The real binary, killed with SIGKILL while a Feishu turn shows its typing reaction: the
/// reaction would stay on the message for good, so the next start takes it away (and the turn
/// run again takes its own reaction away too).
#[tokio::test]
async fn a_typing_reaction_left_by_a_kill_is_taken_away_at_the_next_start() {
    use support::process::{EXIT_DEADLINE, Running, baton};

    let model = FakeOpenAi::start().await;
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", FEISHU_BOT);
    // The killed attempt writes for about 6 s; the run after the restart answers at once.
    model.script("snark", Step::slow(REPLY, 4, Duration::from_millis(100)));
    model.script("snark", Step::reply("Here it is."));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let db = dir.path().join("baton.db");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
             [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
             {FEEDBACK}\n\
             [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"snark\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
             app_id = \"cli_snark\"\napp_secret_env = \"SNARK_FEISHU_APP_SECRET\"\napi_url = \"{}\"\n",
            model.base_url, feishu.api_url
        ),
    )
    .unwrap();
    let start = || {
        let mut cmd = baton(dir.path());
        cmd.arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--database")
            .arg(&db)
            .env("SNARK_FEISHU_APP_SECRET", "secret-snark");
        Running::spawn(cmd)
    };

    let (mut first, out) = start();
    let _base = first.base_url(out).await;
    feishu.wait_connected("snark", 1).await;
    let event = message_event(
        "snark",
        "ev_1",
        "om_human_1",
        ("oc_group", "group"),
        "ou_human",
        "@_user_1 why did the build break?",
        &[(FEISHU_BOT, "snark")],
    );
    feishu.push_event("snark", &event);
    // Killed once the reply has begun to stream: the reaction went up (and its id was put on
    // record) when the turn began, well before the first post.
    feishu.wait_for(|f| f.seen().posts() == 1).await;
    first.kill();
    first.wait(EXIT_DEADLINE).await;
    assert_eq!(feishu.reactions_left(), 1, "{:?}", feishu.seen().all());

    let (mut second, out) = start();
    let _base = second.base_url(out).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    // The reaction left up is taken away, and the turn run again shows and ends its own.
    while !(feishu.seen().typing() == (2, 2) && feishu.reactions_left() == 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} reactions left, saw {:?}; the gateway said:\n{}",
            feishu.reactions_left(),
            feishu.seen().all(),
            second.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(feishu.seen().posts(), 1, "{:?}", feishu.seen().all());
    second.terminate();
    second.wait(EXIT_DEADLINE).await;
}

/// Text the model wrote before calling a tool is a draft, not the reply: once the reply comes,
/// no post is left showing it (the posts a shorter reply does not need are deleted), and a turn
/// that ends silent after showing a draft deletes its post.
#[tokio::test]
async fn a_draft_shown_before_a_tool_call_never_remains_as_extra_posts() {
    let w = world(On::Discord, FEEDBACK).await;
    // About 3,400 characters: two posts on Discord. Written 40 characters every 40 ms, so the
    // second post is due about 1.4 s (nine edit intervals) before the tool call, not a few
    // hundred milliseconds, which a loaded machine could miss.
    let draft = format!("{REPLY}\n\n").repeat(14);
    let draft = draft.trim_end();
    let gap = Duration::from_millis(40);
    w.model
        .script("snark", Step::slow_then_tool(draft, 40, gap, "look_it_up"));
    w.model.script("snark", Step::reply("Here it is."));
    w.ask("tell me everything").await;
    let seen = w.seen();
    assert_eq!(
        seen.posts(),
        2,
        "the draft did not fill two posts: {:?}",
        seen.all()
    );
    assert_eq!(seen.shown(), ["Here it is."], "{:?}", seen.all());

    w.model
        .script("snark", Step::slow_then_tool(REPLY, 8, gap, "look_it_up"));
    w.model.script("snark", Step::reply("NO_REPLY"));
    w.ask("anything else?").await;
    let seen = w.seen();
    assert_eq!(
        seen.posts(),
        3,
        "the second draft was not shown: {:?}",
        seen.all()
    );
    assert_eq!(
        seen.shown(),
        ["Here it is."],
        "a draft is left in the chat: {:?}",
        seen.all()
    );
    // The transcript never reads a deleted draft back to the model as something it said.
    let session = only_transcript(&w).await;
    let replies: Vec<&str> = session
        .iter()
        .filter(|e| e["kind"] == "reply")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(replies, ["Here it is."], "{session:?}");
    w.gateway.stop().await;
}
