//! The dashboard in a real browser (headless Chromium over WebDriver) against a real gateway
//! with echo bots: things happen through the HTTP API (a mention, a `sessions_send`, a chain)
//! and the assertions are on what the page shows, read from its DOM.
//!
//! `BATON_SCREENSHOTS=1 cargo test --test it dashboard::` also saves the README's pictures under
//! `docs/`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, temp_db};
use crate::support::process::eventually;

/// The demo's three echo bots on the local channel, open rooms, `admin` may start chains.
const CONFIG: &str = r#"
[gateway]
drain_seconds = 2

[[bots]]
id = "snark"
name = "Snark"
description = "Wry router"
backend = "echo"
tools = ["bots_list", "sessions_*", "chain_*"]

[[bots]]
id = "caid"
name = "Caid"
description = "Coder"
backend = "echo"
tools = ["sessions_send", "chain_message"]

[[bots]]
id = "sec"
name = "Sec"
description = "Security reviewer"
backend = "echo"
tools = ["sessions_send", "chain_message"]

[chats_default]
group_policy = "open"
dm_policy = "open"
activation = "mention"

[[budgets]]
name = "snark-daily"
scope = "bot"
match = { bot = "snark" }
tokens = 1000000
window = "1d"

[admins]
local = ["admin"]
"#;

const SNARK_LOBBY: &str = "bot:snark:local:snark:lobby";

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The roster, a transcript that grows without a reload, a bot-to-bot call as a nested card,
/// and the chain thread with its turns in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_bots_live_transcripts_calls_and_chains() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(CONFIG, &db).await;
    let browser = Browser::start().await;
    let page = format!("{}/#/session/{}", gw.base, urlencode(SNARK_LOBBY));
    browser.goto(&page).await;

    // The roster: every bot by name, each account connected, nobody busy.
    let names = browser
        .until(
            "the three bots",
            "const n = [...document.querySelectorAll('.bot-card .bot-name')].map(e => e.textContent); \
             return n.length === 3 ? n : null;",
        )
        .await;
    assert_eq!(strings(&names), ["Snark", "Caid", "Sec"]);
    browser
        .until(
            "every account connected",
            "const s = [...document.querySelectorAll('.account .state')].map(e => e.textContent); \
             return s.length === 3 && s.every(t => t === 'connected');",
        )
        .await;

    // A mention, answered while the page is open: the transcript grows without a reload.
    browser.js("window.__sameLoad = true; return true;").await;
    gw.say("lobby", "alice", "@snark hello there").await;
    browser
        .until(
            "snark's reply in the live transcript",
            "return [...document.querySelectorAll('.entries .kind-reply .entry-text')] \
             .some(e => e.textContent === 'hello there');",
        )
        .await;
    assert_eq!(browser.js("return window.__sameLoad === true;").await, true);
    browser.screenshot("dashboard-session").await;

    // A bot-to-bot call: a nested card under the message that caused it. Live redraws rebuild
    // the view (and may draw a delivery already settled beside entries fetched a moment
    // earlier), so each read finds its elements and uses them in one script, and waits while
    // any of them is missing instead of failing on it.
    gw.say("lobby", "alice", "@snark ask @caid: write a haiku")
        .await;
    gw.settle().await;
    let card = browser
        .until(
            "the call card, delivered, between its cause and snark's reply",
            "const c = [...document.querySelectorAll('.run .call-card')] \
               .find(c => c.querySelector('.call-state').textContent === 'delivered'); \
             if (!c) return null; \
             const run = c.closest('.run'); \
             const cause = run.querySelector('.kind-inbound .entry-text'); \
             const after = run.querySelector('.kind-reply .entry-text'); \
             if (!cause || !after) return null; \
             return { caller: c.querySelector('.call-caller').textContent, \
                      target: c.querySelector('.call-target').textContent, \
                      model: c.querySelector('.call-model').textContent, \
                      elapsed: c.querySelector('.call-elapsed').textContent, \
                      cause: cause.textContent, after: after.textContent };",
        )
        .await;
    assert_eq!(card["caller"], "snark", "{card}");
    assert_eq!(card["target"], "caid", "{card}");
    assert_eq!(card["model"], "(echo)", "{card}");
    let elapsed = card["elapsed"].as_str().unwrap();
    assert!(
        elapsed.ends_with(" s") && elapsed.trim_end_matches(" s").parse::<f64>().is_ok(),
        "elapsed time: {elapsed}"
    );
    assert_eq!(card["cause"], "@snark ask @caid: write a haiku", "{card}");
    assert_eq!(card["after"], "write a haiku", "{card}");
    // Expanded, it shows the target's own run: the message it got and its answer.
    browser
        .until(
            "the delivered card's head, clicked",
            "const head = document.querySelector('.call-card.state-delivered .call-head'); \
             if (!head) return null; head.click(); return true;",
        )
        .await;
    let inner = browser
        .until(
            "caid's run inside the card",
            "const i = document.querySelector('.call-card.open .call-inner'); \
             if (!i || !i.querySelector('.kind-answer')) return null; \
             return [...i.querySelectorAll('.entry')].map(e => e.querySelector('.speaker').textContent + ': ' + e.querySelector('.entry-text').textContent);",
        )
        .await;
    assert_eq!(
        strings(&inner),
        [
            "bot:snark: Message from bot 'snark': write a haiku",
            "caid: write a haiku"
        ]
    );
    browser.screenshot("dashboard-call").await;
    // Each human message shows what its trigger cost in all: echo bots' tokens are estimated,
    // and their model has no price.
    let costs = browser
        .until(
            "the triggers' costs on their messages",
            "const c = [...document.querySelectorAll('.entries[data-session] > .run > .kind-inbound')] \
               .map(e => [e.querySelector('.entry-text').textContent, \
                          (e.querySelector('.trigger-cost') || {}).textContent]); \
             return c.length === 2 && c.every(([, cost]) => cost) ? c : null;",
        )
        .await;
    for pair in costs.as_array().unwrap() {
        let cost = pair[1].as_str().unwrap();
        assert!(cost.ends_with(" tokens (est.)"), "{costs}");
        let tokens: String = cost.chars().take_while(char::is_ascii_digit).collect();
        assert!(tokens.parse::<u64>().unwrap() > 0, "{costs}");
    }
    assert_eq!(costs[0][0], "@snark hello there", "{costs}");

    // The roster tells who is here; the deliveries view lists the call.
    browser.goto(&format!("{}/#/deliveries", gw.base)).await;
    browser
        .until(
            "the delivery in the table",
            "return [...document.querySelectorAll('table.deliveries tr .d-state')].some(e => e.textContent === 'delivered');",
        )
        .await;
    let stray = browser
        .js("return [...document.getElementById('main').childNodes].filter(n => n.nodeType === 3).map(n => n.textContent);")
        .await;
    assert_eq!(
        stray,
        json!([]),
        "no stray text (a literal `null`) in the deliveries view"
    );
    browser.screenshot("dashboard-deliveries").await;

    // A chain: turns in order, each speaker's post under its turn bar.
    gw.say(
        "lobby",
        "admin",
        "/baton chain start @caid @sec review the plan",
    )
    .await;
    gw.settle().await;
    let chains = gw.get("/api/chains").await;
    let id = chains["chains"][0]["id"].as_str().unwrap().to_owned();
    browser.goto(&format!("{}/#/chain/{id}", gw.base)).await;
    // Live redraws rebuild the view, so the whole thread is read in one script, once complete.
    let thread = browser
        .until(
            "the chain's two turn bars, two posts and its state",
            "const all = (q, f) => [...document.querySelectorAll(q)].map(f); \
             const bars = all('.chain-thread .turn-bar .turn-to', e => e.textContent); \
             const speakers = all('.chain-thread .chain-turn .speaker', e => e.textContent.trim()); \
             const order = all('.chain-thread > *', e => \
               e.classList.contains('turn-bar') ? 'bar:' + e.querySelector('.turn-to').textContent : \
               e.classList.contains('chain-turn') ? 'post:' + e.dataset.speaker : 'note') \
               .filter(s => s !== 'note'); \
             const state = all('.chain-facts .chain-state', e => e.textContent.trim()); \
             return bars.length === 2 && speakers.length === 2 && state.length === 1 \
               ? {bars, speakers, order, state} : null;",
        )
        .await;
    assert_eq!(strings(&thread["bars"]), ["caid", "sec"]);
    assert_eq!(strings(&thread["speakers"]), ["caid", "sec"]);
    assert_eq!(
        strings(&thread["order"]),
        ["bar:caid", "post:caid", "bar:sec", "post:sec"]
    );
    assert_eq!(strings(&thread["state"]), ["completed"]);
    browser.screenshot("dashboard-chain").await;

    browser.goto(&format!("{}/#/chat", gw.base)).await;
    browser
        .until(
            "the chat panel",
            "return document.getElementById('chat-send') !== null;",
        )
        .await;

    // Spend: what the turns above spent, per bot (echo bots: estimated) and per chat. A run's
    // usage rows ride on its next write, so the page is opened once the store holds them (the
    // page reads them when it opens).
    eventually(
        Duration::from_secs(10),
        "snark's usage on record",
        || async {
            let rows = gw.get("/api/usage?group_by=bot&since=24h").await["rows"].clone();
            let bots: Vec<String> = rows
                .as_array()?
                .iter()
                .filter_map(|r| r["bot"].as_str().map(str::to_owned))
                .collect();
            bots.contains(&"snark".to_owned()).then_some(())
        },
    )
    .await;
    browser.goto(&format!("{}/#/spend", gw.base)).await;
    let spend = browser
        .until(
            "the spend tables",
            "const keys = q => [...document.querySelectorAll(q + ' tr[data-key]')].map(r => r.dataset.key); \
             const bots = keys('#spend-bot'), chats = keys('#spend-chat'); \
             return bots.length && chats.length ? {bots, chats} : null;",
        )
        .await;
    assert!(
        strings(&spend["bots"]).contains(&"snark".to_owned()),
        "{spend}"
    );
    assert!(
        strings(&spend["chats"]).contains(&"local:lobby".to_owned()),
        "{spend}"
    );
    // The budgets closest to their limit: used, limit, share, and when the oldest call frees.
    let fullest = browser
        .until(
            "the budgets closest to their limit",
            "const r = document.querySelector('#spend-budgets tr[data-key=\"snark-daily\"]'); \
             return r ? [...r.querySelectorAll('td')].map(td => td.textContent) : null;",
        )
        .await;
    let cells = strings(&fullest);
    assert_eq!(cells[0], "snark-daily", "{cells:?}");
    assert!(
        cells[1].ends_with(" tokens") && cells[1] != "0 tokens",
        "{cells:?}"
    );
    assert_eq!(cells[2], "1,000,000 tokens", "{cells:?}");
    assert_eq!(cells[3], "0%", "{cells:?}");
    assert!(
        cells[4].ends_with('m') || cells[4].ends_with('s'),
        "{cells:?}"
    );
    assert!(
        cells[4].starts_with("23h") || cells[4].starts_with("24h"),
        "{cells:?}"
    );
    browser.close().await;
    gw.stop().await;
}

/// Message text is untrusted: `<script>` and markup in a message are shown as text and never
/// run; and the chat panel talks to a bot through the pipeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_text_is_shown_as_text_and_the_chat_panel_reaches_a_bot() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(CONFIG, &db).await;
    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/#/session/{}", gw.base, urlencode(SNARK_LOBBY)))
        .await;
    browser
        .until(
            "the roster",
            "return document.querySelectorAll('.bot-card').length === 3;",
        )
        .await;
    let attack = "@snark <script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">";
    gw.say("lobby", "mallory", attack).await;
    let shown = browser
        .until(
            "the attack as text",
            "const e = [...document.querySelectorAll('.entries .kind-inbound .entry-text')] \
               .find(e => e.textContent.includes('<script>')); return e ? e.textContent : null;",
        )
        .await;
    assert_eq!(shown, attack);
    let ran = browser
        .js("return [window.__xss === undefined, document.querySelectorAll('.entries script, .entries img').length];")
        .await;
    assert_eq!(ran, serde_json::json!([true, 0]));

    // Control, invisible and text-direction characters are shown escaped, never acted on.
    gw.say(
        "lobby",
        "mallory",
        "@snark evil\u{202e}txt.exe\u{0}\u{1b}[2J\u{200b}end",
    )
    .await;
    let shown = browser
        .until(
            "the hidden characters escaped",
            "const e = [...document.querySelectorAll('.entries .kind-inbound .entry-text')] \
               .find(e => e.textContent.includes('evil')); return e ? e.textContent : null;",
        )
        .await;
    assert_eq!(
        shown,
        "@snark evil<U+202E>txt.exe<U+0000><U+001B>[2J<U+200B>end"
    );

    // The chat panel: a direct message to caid, answered through the pipeline.
    browser.goto(&format!("{}/#/chat", gw.base)).await;
    browser
        .until(
            "the bot picker",
            "return document.getElementById('chat-bot') !== null;",
        )
        .await;
    browser
        .js(
            "const s = document.getElementById('chat-bot'); s.value = 'caid'; \
             s.dispatchEvent(new Event('change')); return true;",
        )
        .await;
    browser
        .until(
            "caid picked",
            "const s = document.getElementById('chat-bot'); return s && s.value === 'caid';",
        )
        .await;
    browser
        .js("document.getElementById('chat-input').value = 'ship it'; \
             document.getElementById('chat-send').click(); return true;")
        .await;
    let said = browser
        .until(
            "caid's answer in the chat log",
            "const m = [...document.querySelectorAll('#chat-log .chat-message.from-bot')]; \
             return m.length ? m.map(e => e.querySelector('.speaker').textContent + ': ' + e.querySelector('.entry-text').textContent) : null;",
        )
        .await;
    assert_eq!(strings(&said), ["caid: ship it"]);
    let transcript = gw.transcript("bot:caid:local:caid:dm:dashboard").await;
    assert!(
        transcript
            .iter()
            .any(|e| e["kind"] == "reply" && e["text"] == "ship it"),
        "the DM went through the pipeline: {transcript:?}"
    );
    browser.screenshot("dashboard-chat").await;
    browser.close().await;
    gw.stop().await;
}

/// A delivery's card shows what its target reported with `progress`, the artifacts it was
/// handed and the ones its run made, each a link to the content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_shows_its_progress_and_its_artifacts_in_and_out() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        Step::tool_call(
            "artifact_put",
            json!({"name": "prices.json", "text": "[1, 2]"}),
        ),
    );
    fake.script(
        "a",
        Step::tool_call_with("sessions_send", |request| {
            let line = request["messages"]
                .as_array()
                .unwrap()
                .iter()
                .rfind(|l| l["role"] == "tool")
                .unwrap();
            let put: Value = serde_json::from_str(line["content"].as_str().unwrap()).unwrap();
            json!({"target": "b", "message": "sum them", "artifacts": [put["id"]]})
        }),
    );
    fake.script("a", Step::reply("sent"));
    fake.script(
        "b",
        Step::tool_call(
            "progress",
            json!({"message": "reading the prices", "step": 1, "of": 2}),
        ),
    );
    fake.script(
        "b",
        Step::tool_call("artifact_put", json!({"name": "sum.txt", "text": "3"})),
    );
    fake.script("b", Step::reply("3"));
    let mut config = String::from(
        "[gateway]\ndrain_seconds = 1\n\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n",
    );
    for id in ["a", "b"] {
        config.push_str(&format!(
            "\n[[bots]]\nid = \"{id}\"\nname = \"{id}\"\nbackend = \"openai\"\nmodel = \"{id}\"\n\
             base_url = \"{}\"\ntools = [\"*\"]\n",
            fake.base_url
        ));
    }
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config, &db).await;
    gw.say("room", "alice", "@a add up the prices").await;
    gw.settle().await;
    let deliveries = gw.get("/api/deliveries").await;
    let d = &deliveries["deliveries"][0];
    assert_eq!(d["state"], "delivered", "{d}");
    let run = d["run_id"].as_str().unwrap().to_owned();
    let handed = d["artifacts_in"][0].as_str().unwrap().to_owned();

    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/#/delivery/{}", gw.base, urlencode(&run)))
        .await;
    let card = browser
        .until(
            "the delivery's card with its progress and artifacts",
            "const c = document.querySelector('.delivery-detail .call-card'); \
             if (!c || !c.querySelector('.artifacts-out')) return null; \
             const all = (q, f) => [...c.querySelectorAll(q)].map(f); \
             return { progress: all('.call-progress .progress-line', e => \
                        e.querySelector('.progress-step').textContent + ' ' + \
                        e.querySelector('.progress-message').textContent), \
                      handed: all('.artifacts-in .artifact', e => e.dataset.id), \
                      made: all('.artifacts-out .artifact .art-name', e => e.textContent), \
                      href: all('.artifacts-out .artifact', e => e.getAttribute('href')) };",
        )
        .await;
    assert_eq!(strings(&card["progress"]), ["1/2 reading the prices"]);
    assert_eq!(strings(&card["handed"]), [handed]);
    assert_eq!(strings(&card["made"]), ["sum.txt"]);
    let href = card["href"][0].as_str().unwrap();
    let made = d["artifacts_out"][0]["id"].as_str().unwrap();
    assert_eq!(href, format!("/api/artifacts/{made}/content"));
    browser.close().await;
    gw.stop().await;
}

/// Every message in the room's chat log has a "why?": a message nobody was asked in shows each
/// bot's decision (not mentioned); one that asked snark shows its turn and what it posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_shows_why_nobody_answered() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(CONFIG, &db).await;
    let unasked = gw.say("lobby", "alice", "lunch at noon?").await;
    let asked = gw.say("lobby", "alice", "@snark hello").await;
    gw.settle().await;
    let browser = Browser::start().await;
    browser.goto(&format!("{}/#/chat", gw.base)).await;
    browser
        .until(
            "the chat panel",
            "return document.getElementById('chat-mode') !== null;",
        )
        .await;
    browser
        .js(
            "const s = document.getElementById('chat-mode'); s.value = 'room'; \
             s.dispatchEvent(new Event('change')); return true;",
        )
        .await;
    let lines = |id: &str| {
        format!(
            "const m = document.querySelector('#chat-log [data-message=\"{id}\"]'); \
             if (!m) return null; \
             const lines = [...m.querySelectorAll('.why-line')].map(l => l.textContent); \
             if (lines.length) return lines; \
             m.querySelector('.why-toggle').dataset.asked || (m.querySelector('.why-toggle').click(), \
               m.querySelector('.why-toggle').dataset.asked = '1'); \
             return null;"
        )
    };
    let unasked_id = unasked["id"].as_str().unwrap();
    let shown = browser
        .until(
            "why, on the message nobody was asked in",
            &lines(unasked_id),
        )
        .await;
    let mut shown = strings(&shown);
    shown.sort();
    assert_eq!(
        shown,
        [
            "caid activation buffered: not mentioned",
            "sec activation buffered: not mentioned",
            "snark activation buffered: not mentioned",
        ]
    );
    let asked_id = asked["id"].as_str().unwrap();
    let shown = strings(
        &browser
            .until("why, on the message to snark", &lines(asked_id))
            .await,
    );
    let reply = gw.said_by("lobby", "snark").await;
    let posted = reply[0]["id"].as_str().unwrap();
    let snark = shown.iter().find(|l| l.starts_with("snark")).unwrap();
    for other in ["caid", "sec"] {
        let line = format!("{other} activation buffered: mentions only other bots");
        assert!(shown.contains(&line), "{shown:?}");
    }
    assert!(
        snark.starts_with("snark turn replied: mentioned · waited ")
            && snark.ends_with(&format!("posted {posted}")),
        "{shown:?}"
    );
    browser.close().await;
    gw.stop().await;
}

pub(crate) fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
