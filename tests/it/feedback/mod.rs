//! What people see while a bot works, on Slack, Discord and Feishu: a real gateway whose bot
//! sits on a fake platform, with a fake model that writes its reply slowly. Every assertion is
//! on what the fake platform saw (posts, edits, the typing indicator), in the order it saw them.

mod bounds;
mod kills;
mod native;
mod streaming;
mod typing;

use std::path::Path;
use std::time::Duration;

use baton::metrics::EVENTS_IN;
use serde_json::Value;

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::{FakeFeishu, message_event};
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::{FakeSlack, event_body, events_envelope};
use crate::support::gateway::{DEADLINE, TestGateway};
use crate::support::seen::{Seen, Timeline};

/// A reply long enough to stream: about 240 characters.
const REPLY: &str = "Here is what I found. The build broke because the lock file pins an old \
                     version of the parser, and the new grammar needs the newer one. Bump it, run \
                     the tests again, and the whole suite should pass in a few minutes.";

/// Short intervals so a test streams within a second or two.
const FEEDBACK: &str = "\n[feedback]\nedit_interval_ms = 150\nstream_min_chars = 40\n";

/// [`FEEDBACK`] with the platform's own streaming.
const NATIVE: &str =
    "\n[feedback]\nstream = \"native\"\nedit_interval_ms = 150\nstream_min_chars = 40\n";

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
    world_of(on, gateway, None, extra).await
}

/// [`world`] whose bot has `backend` as its `[[bots]]` keys after the id, instead of the fake
/// model's (`{model_url}` in them is the fake model's base URL).
async fn world_of_agent(on: On, backend: &str, extra: &str) -> World {
    world_of(on, "", Some(backend), extra).await
}

async fn world_of(on: On, gateway: &str, backend: Option<&str>, extra: &str) -> World {
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
    let backend = backend.map_or_else(
        || {
            format!(
                "backend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"",
                model.base_url
            )
        },
        |keys| keys.replace("{model_url}", &model.base_url),
    );
    let text = format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n{gateway}\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\n{backend}\n\n\
         [[accounts]]\nbot = \"snark\"\n{account}\n{extra}"
    );
    let (dir, db) = crate::support::gateway::temp_db();
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
            .engine()
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
