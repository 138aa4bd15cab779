//! Room export (SPEC 13): a local room of two bots on the openai backend, answered by the fake
//! model. A person's message nobody answers, then a mention a delegates to b (`sessions_send`):
//! `GET /api/chats/local/room/export` and `baton export` on the same store give every author,
//! the delivery with its reply, in time order, as JSON lines and as Markdown with the same
//! texts, bounded by `since`/`until`, and never the backend's key. A room where a bot keeps an
//! artifact and a chain runs gives the artifact (name, sha256) and each of the chain's turns.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_with, temp_db};
use crate::support::process::{baton, output, show};
use crate::support::world::agents_config;

const SECRET: &str = "sk-export-never-shown-4f1c";

/// The export's body, as the API sends it, with `query` appended.
async fn api(gw: &TestGateway, query: &str) -> String {
    let response = gw
        .http
        .get(format!("{}/api/chats/local/room/export{query}", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{query}");
    response.text().await.unwrap()
}

/// The export as `baton export --chat local:room` prints it on the store file `db`.
async fn cli(dir: &Path, db: &Path, extra: &[&str]) -> String {
    let mut cmd = baton(dir);
    cmd.args(["export", "--chat", "local:room", "--database"])
        .arg(db)
        .args(extra);
    let out = output(cmd).await;
    assert!(out.status.success(), "{extra:?}: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn parsed(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Where in `lines` the first line of `kind` says `text` (as its text) is.
fn at(lines: &[Value], kind: &str, text: &str) -> usize {
    lines
        .iter()
        .position(|l| l["kind"] == kind && l["text"] == text)
        .unwrap_or_else(|| panic!("no {kind} `{text}` in {lines:#?}"))
}

/// `markdown` is the room's Markdown form, one list item per JSON line in the same order, each
/// saying every word of its line: author, text, reply, and an artifact's name and sha256.
fn says_the_same(lines: &[Value], markdown: &str) {
    assert!(markdown.starts_with("# local:room\n"), "{markdown}");
    // A line's further lines are indented under its item: only items start a line with `- `.
    let items: Vec<&str> = markdown.split("\n- `").skip(1).collect();
    assert_eq!(items.len(), lines.len(), "one item per line:\n{markdown}");
    for (line, item) in lines.iter().zip(items) {
        for key in ["author", "text", "reply", "name", "sha256"] {
            let said = line[key].as_str().unwrap_or_default();
            for words in said.lines() {
                assert!(
                    item.contains(words.trim()),
                    "{key} `{said}` missing:\n{item}"
                );
            }
        }
    }
}

#[tokio::test]
async fn export_gives_the_whole_room_in_time_order_with_every_author() {
    let fake = FakeOpenAi::start().await;
    fake.require_api_key(SECRET);
    fake.script(
        "a",
        Step::tool_call(
            "sessions_send",
            json!({"target": "b", "message": "review this diff"}),
        ),
    );
    fake.script("b", Step::reply("looks good to me"));
    fake.script("a", Step::reply("b says it looks good"));
    let keys = "api_key_env = \"EXPORT_TEST_KEY\"\n";
    let config = agents_config(&fake, &["a", "b"], "")
        .replace("tools = [\"*\"]\n", &format!("tools = [\"*\"]\n{keys}"));
    let (dir, db) = temp_db();
    let env = |name: &str| (name == "EXPORT_TEST_KEY").then(|| SECRET.to_owned());
    let gw = TestGateway::start_with_env(&config, &db, &env).await;

    gw.say("room", "alice", "lunch at noon?").await;
    gw.settle().await;
    gw.say("room", "alice", "@a please get this reviewed").await;
    gw.settle().await;
    assert_eq!(fake.requests().len(), 3, "a, b, then a again");

    let body = api(&gw, "").await;
    let lines = parsed(&body);
    let unanswered = at(&lines, "message", "lunch at noon?");
    let mention = at(&lines, "message", "@a please get this reviewed");
    let delivery = at(&lines, "delivery", "review this diff");
    let answer = at(&lines, "turn", "looks good to me");
    let reply = at(&lines, "turn", "b says it looks good");
    assert!(
        unanswered < mention && mention < delivery && delivery < answer && answer < reply,
        "in time order: {lines:#?}"
    );
    let times: Vec<i64> = lines.iter().map(|l| l["ts_ms"].as_i64().unwrap()).collect();
    assert!(times.is_sorted(), "{times:?}");
    for (line, author, kind) in [
        (unanswered, "alice", "person"),
        (mention, "alice", "person"),
        (delivery, "bot:a", "bot"),
        (answer, "bot:b", "bot"),
        (reply, "bot:a", "bot"),
    ] {
        assert_eq!(lines[line]["author"], author, "{:#}", lines[line]);
        assert_eq!(lines[line]["author_kind"], kind, "{:#}", lines[line]);
    }
    let sent = &lines[delivery];
    assert_eq!(sent["to"], "bot:b", "{sent:#}");
    assert_eq!(sent["state"], "delivered", "{sent:#}");
    assert_eq!(sent["reply"], "looks good to me", "{sent:#}");

    // The Markdown form says the same things.
    let markdown = api(&gw, "?format=markdown").await;
    says_the_same(&lines, &markdown);

    // since and until bound it.
    let (first, second) = (times[unanswered], times[mention]);
    let early = parsed(&api(&gw, &format!("?until={first}")).await);
    assert!(
        early.iter().any(|l| l["text"] == "lunch at noon?"),
        "{early:#?}"
    );
    assert!(
        early.iter().all(|l| l["ts_ms"].as_i64() <= Some(first)),
        "{early:#?}"
    );
    let late = parsed(&api(&gw, &format!("?since={second}")).await);
    assert!(
        late.iter().all(|l| l["text"] != "lunch at noon?"),
        "{late:#?}"
    );
    assert_eq!(late.len(), lines.len() - mention, "{late:#?}");

    // The command line prints the same, on the same store.
    assert_eq!(cli(dir.path(), &db, &[]).await, body);
    assert_eq!(
        cli(dir.path(), &db, &["--format", "markdown"]).await,
        markdown
    );
    let since = second.to_string();
    assert_eq!(
        parsed(&cli(dir.path(), &db, &["--since", &since]).await),
        late
    );

    // Neither form ever shows the backend's key or an Authorization header.
    for text in [&body, &markdown] {
        assert!(!text.contains(SECRET), "{text}");
        assert!(!text.to_lowercase().contains("bearer"), "{text}");
        assert!(!text.to_lowercase().contains("authorization"), "{text}");
    }

    // A parameter that does not parse is a 400 that says what to write.
    let bad = gw
        .http
        .get(format!(
            "{}/api/chats/local/room/export?since=soon",
            gw.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let said: Value = bad.json().await.unwrap();
    assert!(said["error"].as_str().unwrap().contains("since"), "{said}");
    gw.stop().await;
}

#[tokio::test]
async fn export_gives_a_rooms_artifacts_and_its_chains_turns() {
    let fake = FakeOpenAi::start().await;
    let notes = "alpha\nbeta\n";
    fake.script(
        "caid",
        Step::tool_call("artifact_put", json!({"name": "names.txt", "text": notes})),
    );
    fake.script("caid", Step::reply("kept names.txt"));
    fake.script("caid", Step::reply("I say alpha"));
    fake.script("sec", Step::reply("I say beta"));
    let bots = [("caid", "tools = [\"*\"]"), ("sec", "tools = [\"*\"]")];
    let config = config_with(&fake.base_url, &bots, "\n[chains]\nrounds = 1\n");
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config, &db).await;

    gw.say("room", "alice", "@caid write the names down").await;
    gw.settle().await;
    gw.say(
        "room",
        "admin",
        "/baton chain start @caid @sec name the project",
    )
    .await;
    gw.settle().await;
    assert_eq!(fake.requests().len(), 4, "caid twice, then each chain turn");

    let lines = parsed(&api(&gw, "").await);
    let kept = lines
        .iter()
        .position(|l| l["kind"] == "artifact")
        .unwrap_or_else(|| panic!("an artifact line: {lines:#?}"));
    let artifact = &lines[kept];
    assert_eq!(artifact["name"], "names.txt", "{artifact:#}");
    let sha256 = format!("{:x}", Sha256::digest(notes.as_bytes()));
    assert_eq!(artifact["sha256"], sha256, "{artifact:#}");
    assert_eq!(
        (&artifact["author"], &artifact["author_kind"]),
        (&json!("bot:caid"), &json!("bot"))
    );
    let chain_line = |text: &str| {
        lines
            .iter()
            .position(|l| l["kind"] == "chain" && l["text"] == text)
            .unwrap_or_else(|| panic!("the chain turn `{text}`: {lines:#?}"))
    };
    let (first, second) = (chain_line("I say alpha"), chain_line("I say beta"));
    assert!(kept < first && first < second, "in time order: {lines:#?}");
    for (at, author) in [(first, "bot:caid"), (second, "bot:sec")] {
        let turn = &lines[at];
        assert_eq!(turn["author"], author, "{turn:#}");
        assert!(
            turn["chain"].as_str().unwrap().starts_with("ch-"),
            "{turn:#}"
        );
        assert_eq!(turn["chain"], lines[first]["chain"], "one chain: {turn:#}");
    }

    says_the_same(&lines, &api(&gw, "?format=markdown").await);
    gw.stop().await;
}
