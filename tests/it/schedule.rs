//! Heartbeats and cron entries, end to end: a real gateway on loopback
//! with the fake model, and the scheduler's clock driven by the test (`tick` at chosen times),
//! so nothing waits for real time to pass.

use baton::schedule::{SkipReason, TickOutcome, Ticked};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use serde_json::Value;

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{DEADLINE, TestGateway, config_text, temp_db};

/// Monday 2025-03-03, `h:m` UTC (the test gateway's clock is UTC).
fn monday(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 3, h, m, 0).unwrap()
}

/// A bot on the fake model, with `schedule` (heartbeat key, `[[bots.cron]]` tables) in its table.
fn bot(fake: &FakeOpenAi, id: &str, schedule: &str) -> String {
    format!(
        "\n[[bots]]\nid = \"{id}\"\nbackend = \"openai\"\nmodel = \"{id}\"\nbase_url = \"{}\"\n{schedule}\n",
        fake.base_url
    )
}

async fn start(fake: &FakeOpenAi, bots: &str, db: &std::path::Path) -> TestGateway {
    TestGateway::start(&config_text(&fake.base_url, &[], bots), db).await
}

fn ticked(bot: &str, job: &str, outcome: TickOutcome) -> Vec<Ticked> {
    vec![Ticked {
        bot: bot.parse().unwrap(),
        job: job.into(),
        outcome,
    }]
}

/// Entries of `kind` whose meta `reason` is `reason`.
fn with_reason<'a>(transcript: &'a [Value], kind: &str, reason: &str) -> Vec<&'a Value> {
    transcript
        .iter()
        .filter(|e| e["kind"] == kind && e["meta"]["reason"] == reason)
        .collect()
}

/// The text of the last user line of a model request.
fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

const PRIVATE: &str = "bot:hb:local:hb:schedule:heartbeat";

#[tokio::test]
async fn a_heartbeat_due_during_a_long_turn_is_skipped_then_runs_after_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = start(
        &fake,
        &bot(&fake, "hb", "heartbeat = { every = \"30m\" }"),
        &db,
    )
    .await;

    // A long turn: the model holds the request until the test releases it.
    fake.hold();
    gw.say("ops", "ana", "@hb summarise the incident").await;
    assert_eq!(fake.wait_for_requests(1, DEADLINE).await.len(), 1);

    assert_eq!(gw.tick(monday(10, 0)).await, vec![], "the first tick arms");
    let busy = TickOutcome::Waiting(SkipReason::RequestsInFlight);
    assert_eq!(
        gw.tick(monday(10, 30)).await,
        ticked("hb", "heartbeat", busy)
    );
    assert_eq!(
        gw.tick(monday(10, 31)).await,
        ticked("hb", "heartbeat", busy),
        "still due, still not queued"
    );
    assert_eq!(fake.requests().len(), 1, "no heartbeat behind the turn");

    fake.release();
    gw.settle().await;
    assert_eq!(
        gw.tick(monday(10, 32)).await,
        ticked("hb", "heartbeat", TickOutcome::Started),
        "the first tick after the turn ends runs it"
    );
    gw.settle().await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        last_user_text(&requests[1]).contains("This is a heartbeat"),
        "{:#}",
        requests[1]
    );

    let transcript = gw.transcript(PRIVATE).await;
    assert_eq!(
        with_reason(&transcript, "notice", "requests-in-flight").len(),
        1,
        "recorded once for the occurrence: {transcript:#?}"
    );
    let answer = transcript.iter().find(|e| e["kind"] == "answer").unwrap();
    assert_eq!(
        answer["meta"]["posted"], false,
        "target none is never posted"
    );
    assert!(
        gw.said_by("ops", "hb").await.len() == 1,
        "only the turn's reply"
    );

    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("baton_scheduled_skips_total{reason=\"requests-in-flight\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("baton_scheduled_runs_total{kind=\"heartbeat\"} 1\n"));
    // The next one keeps the half-hour cadence.
    let next = gw.gateway.scheduler().next_due();
    assert_eq!(next.len(), 1);
    assert_eq!(
        (next[0].bot.as_str(), next[0].job.as_str()),
        ("hb", "heartbeat")
    );
    assert_eq!(next[0].at, monday(11, 0));
    gw.stop().await;
}

#[tokio::test]
async fn scheduled_turns_run_on_the_cron_lane_at_its_configured_concurrency() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let config = format!(
        "{}{}\n[lanes]\ncron = 1\n",
        bot(&fake, "hb", "heartbeat = { every = \"30m\" }"),
        bot(&fake, "hb2", "heartbeat = { every = \"30m\" }")
    );
    let gw = start(&fake, &config, &db).await;
    fake.hold();
    gw.tick(monday(10, 0)).await;
    let started = gw.tick(monday(10, 30)).await;
    assert_eq!(started.len(), 2, "{started:?}");
    assert_eq!(fake.wait_for_requests(1, DEADLINE).await.len(), 1);

    // One runs (held by the model), the other waits for the lane's only slot.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let metrics = gw.metrics().await;
        if metrics.contains("baton_lane_queued{lane=\"cron\"} 1\n")
            && metrics.contains("baton_lane_running{lane=\"cron\"} 1\n")
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{metrics}");
        tokio::task::yield_now().await;
    }
    assert_eq!(fake.requests().len(), 1, "the second has no slot yet");
    assert_eq!(fake.max_in_flight(), 1);

    fake.release();
    gw.settle().await;
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.max_in_flight(), 1, "never two at once");
    gw.stop().await;
}

#[tokio::test]
async fn an_empty_checklist_skips_the_heartbeat_until_it_has_something_in_it() {
    let fake = FakeOpenAi::start().await;
    let (dir, db) = temp_db();
    let file = dir.path().join("HEARTBEAT.md");
    std::fs::write(&file, "# Heartbeat\n\n## Daily\n- [ ]\n* [ ] \n").unwrap();
    let schedule = format!(
        "heartbeat = {{ every = \"30m\", prompt_file = \"{}\" }}",
        file.display()
    );
    let gw = start(&fake, &bot(&fake, "hb", &schedule), &db).await;

    gw.tick(monday(10, 0)).await;
    assert_eq!(
        gw.tick(monday(10, 30)).await,
        ticked("hb", "heartbeat", TickOutcome::Skipped(SkipReason::Empty))
    );
    gw.settle().await;
    assert!(
        fake.requests().is_empty(),
        "no model turn for an empty file"
    );
    let transcript = gw.transcript(PRIVATE).await;
    assert_eq!(with_reason(&transcript, "notice", "empty").len(), 1);
    assert!(
        gw.metrics()
            .await
            .contains("baton_scheduled_skips_total{reason=\"empty\"} 1\n")
    );

    // The file is read at every heartbeat: a real item makes the next one run.
    std::fs::write(
        &file,
        "# Heartbeat\n- [ ] ask caid about the release notes\n",
    )
    .unwrap();
    assert_eq!(
        gw.tick(monday(11, 0)).await,
        ticked("hb", "heartbeat", TickOutcome::Started)
    );
    gw.settle().await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(last_user_text(&requests[0]).contains("- [ ] ask caid about the release notes"));
    gw.stop().await;
}

#[tokio::test]
async fn heartbeat_ok_delivers_nothing() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let schedule = "heartbeat = { every = \"30m\", target = \"local:ops\" }";
    let gw = start(&fake, &bot(&fake, "hb", schedule), &db).await;
    fake.script("hb", Step::reply("  HEARTBEAT_OK\n"));

    gw.tick(monday(10, 0)).await;
    gw.tick(monday(10, 30)).await;
    gw.settle().await;

    assert_eq!(fake.requests().len(), 1);
    assert!(gw.said_by("ops", "hb").await.is_empty(), "nothing posted");
    let transcript = gw.transcript("bot:hb:local:hb:ops").await;
    let ok = with_reason(&transcript, "silent", "heartbeat-ok");
    assert_eq!(ok.len(), 1, "{transcript:#?}");
    assert!(transcript.iter().all(|e| e["kind"] != "reply"));
    assert!(
        gw.metrics()
            .await
            .contains("baton_scheduled_suppressed_total{reason=\"heartbeat-ok\"} 1\n")
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_same_heartbeat_text_within_24_hours_is_delivered_once_even_across_a_restart() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let schedule = "heartbeat = { every = \"30m\", target = \"local:ops\" }";
    let config = bot(&fake, "hb", schedule);
    let reminder = "Reminder: the release freeze starts at 17:00.";
    for _ in 0..3 {
        fake.script("hb", Step::reply(reminder));
    }

    let gw = start(&fake, &config, &db).await;
    gw.tick(monday(10, 0)).await;
    gw.tick(monday(10, 30)).await;
    gw.settle().await;
    let said = gw.said_by("ops", "hb").await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["text"], reminder);
    gw.stop().await;

    // The last delivered text is durable: after a restart the same text is still a duplicate.
    let gw = start(&fake, &config, &db).await;
    assert_eq!(
        gw.tick(monday(11, 0)).await,
        ticked("hb", "heartbeat", TickOutcome::Started)
    );
    gw.settle().await;
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(
        gw.said_by("ops", "hb").await.len(),
        1,
        "suppressed (the room keeps the post from before the restart)"
    );
    let transcript = gw.transcript("bot:hb:local:hb:ops").await;
    let duplicate = with_reason(&transcript, "silent", "duplicate");
    assert_eq!(duplicate.len(), 1, "{transcript:#?}");
    assert_eq!(duplicate[0]["meta"]["said"], reminder);
    assert!(
        gw.metrics()
            .await
            .contains("baton_scheduled_suppressed_total{reason=\"duplicate\"} 1\n")
    );

    // More than 24 hours after it was delivered, the same text is news again.
    let next_day = monday(10, 31) + TimeDelta::hours(24);
    gw.tick(next_day).await;
    gw.settle().await;
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(gw.said_by("ops", "hb").await.len(), 2, "posted again");
    gw.stop().await;
}

#[tokio::test]
async fn a_cron_entry_fires_at_its_time_into_its_chat() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let schedule = r#"
[[bots.cron]]
schedule = "0 9 * * 1-5"
chat = "local:standup"
prompt = "Post the standup reminder."
"#;
    let gw = start(&fake, &bot(&fake, "crier", schedule), &db).await;
    fake.script("crier", Step::reply("Standup in the huddle, now."));
    fake.script("crier", Step::reply("Standup, Tuesday edition."));

    assert_eq!(gw.tick(monday(8, 58)).await, vec![]);
    assert_eq!(gw.tick(monday(8, 59)).await, vec![], "not yet");
    assert_eq!(
        gw.tick(monday(9, 0)).await,
        ticked("crier", "cron-0", TickOutcome::Started)
    );
    gw.settle().await;
    let said = gw.said_by("standup", "crier").await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["text"], "Standup in the huddle, now.");
    let request = &fake.requests()[0];
    assert!(last_user_text(request).contains("Post the standup reminder."));
    assert!(last_user_text(request).contains("cron `0 9 * * 1-5`"));
    assert_eq!(gw.tick(monday(9, 1)).await, vec![], "once per slot");
    let transcript = gw.transcript("bot:crier:local:crier:standup").await;
    let heard = transcript.iter().find(|e| e["kind"] == "inbound").unwrap();
    assert_eq!(heard["speaker"], "baton");
    assert_eq!(heard["meta"]["schedule"], "cron");
    gw.stop().await;

    // Down over Tuesday 09:00: the slot is not forgotten; it runs once when the gateway is back.
    let gw = start(&fake, &bot(&fake, "crier", schedule), &db).await;
    let tuesday = |h, m| monday(h, m) + TimeDelta::days(1);
    assert_eq!(
        gw.tick(tuesday(9, 20)).await,
        ticked("crier", "cron-0", TickOutcome::Started)
    );
    assert_eq!(gw.tick(tuesday(9, 21)).await, vec![]);
    gw.settle().await;
    let said = gw.said_by("standup", "crier").await;
    assert_eq!(
        said.len(),
        2,
        "Monday's post (kept by the room) and Tuesday's once"
    );
    assert_eq!(said[1]["text"], "Standup, Tuesday edition.");
    assert_eq!(fake.requests().len(), 2);
    let next = gw.gateway.scheduler().next_due();
    assert_eq!(next[0].at, tuesday(9, 0) + TimeDelta::days(1));
    gw.stop().await;
}

#[tokio::test]
async fn a_restart_neither_fires_every_heartbeat_at_once_nor_restarts_the_interval() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let config = format!(
        "{}{}",
        bot(&fake, "hb", "heartbeat = { every = \"30m\" }"),
        bot(&fake, "hb2", "heartbeat = { every = \"1h\" }")
    );
    let gw = start(&fake, &config, &db).await;
    gw.tick(monday(10, 0)).await;
    gw.stop().await;

    let gw = start(&fake, &config, &db).await;
    assert_eq!(
        gw.tick(monday(10, 20)).await,
        vec![],
        "nothing fires at start"
    );
    assert_eq!(
        gw.tick(monday(10, 30)).await,
        ticked("hb", "heartbeat", TickOutcome::Started),
        "due when it was due before the restart, not 30 minutes after it"
    );
    gw.settle().await;
    assert_eq!(fake.requests().len(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn group_monitoring_answers_an_unaddressed_question_in_its_thread() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let schedule = "heartbeat = { every = \"30m\", target = \"ops\" }";
    let gw = start(&fake, &bot(&fake, "watch", schedule), &db).await;

    // Nobody mentions the bot: the question only lands in the chat's history buffer.
    let question = gw
        .say("ops", "ana", "does anyone know where the runbook lives?")
        .await;
    gw.say("ops", "bo", "no idea").await;
    gw.settle().await;
    assert!(fake.requests().is_empty(), "not woken by the messages");
    let id = question["id"].as_str().unwrap().to_owned();
    fake.script(
        "watch",
        Step::reply(format!(">> {id} It is in docs/runbook.md.")),
    );

    gw.tick(monday(10, 0)).await;
    gw.tick(monday(10, 30)).await;
    gw.settle().await;

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let shown = last_user_text(&requests[0]);
    assert!(
        shown.contains(&format!(
            "[{id}] ana: does anyone know where the runbook lives?"
        )),
        "{shown}"
    );
    let said = gw.said_by("ops", "watch").await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["text"], "It is in docs/runbook.md.");
    assert_eq!(said[0]["reply_to"], id.as_str(), "in the question's thread");

    // The buffer was taken: the next heartbeat is not shown the same question again.
    fake.script("watch", Step::reply("HEARTBEAT_OK"));
    gw.tick(monday(11, 0)).await;
    gw.settle().await;
    let again = last_user_text(&fake.requests()[1]);
    assert!(!again.contains("runbook"), "{again}");
    gw.stop().await;
}

#[tokio::test]
async fn a_bot_paused_in_the_chat_says_nothing_there_on_schedule_either() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let schedule = r#"
[[bots.cron]]
schedule = "*/5 * * * *"
chat = "standup"
prompt = "Post the standup reminder."
"#;
    let gw = start(&fake, &bot(&fake, "crier", schedule), &db).await;
    gw.say("standup", "admin", "/baton pause @crier").await;
    gw.settle().await;
    let before = gw.said_by("standup", "crier").await.len();

    gw.tick(monday(9, 1)).await;
    assert_eq!(
        gw.tick(monday(9, 5)).await,
        ticked("crier", "cron-0", TickOutcome::Skipped(SkipReason::Paused))
    );
    gw.settle().await;
    assert!(fake.requests().is_empty());
    assert_eq!(
        gw.said_by("standup", "crier").await.len(),
        before,
        "no scheduled post"
    );
    let transcript = gw.transcript("bot:crier:local:crier:standup").await;
    assert_eq!(with_reason(&transcript, "notice", "paused").len(), 1);

    gw.say("standup", "admin", "/baton resume @crier").await;
    gw.settle().await;
    assert_eq!(
        gw.tick(monday(9, 10)).await,
        ticked("crier", "cron-0", TickOutcome::Started)
    );
    gw.settle().await;
    assert_eq!(fake.requests().len(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn quiet_hours_hold() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let schedule = "heartbeat = { every = \"30m\", quiet_hours = \"22:00-07:00\" }";
    let gw = start(&fake, &bot(&fake, "hb", schedule), &db).await;

    gw.tick(monday(21, 0)).await;
    assert_eq!(
        gw.tick(monday(21, 30)).await,
        ticked("hb", "heartbeat", TickOutcome::Started)
    );
    gw.settle().await;
    assert_eq!(
        gw.tick(monday(22, 0)).await,
        ticked(
            "hb",
            "heartbeat",
            TickOutcome::Skipped(SkipReason::QuietHours)
        )
    );
    let tuesday = |h, m| monday(h, m) + TimeDelta::days(1);
    for quiet in [monday(23, 0), tuesday(3, 0), tuesday(6, 59)] {
        assert_eq!(gw.tick(quiet).await, vec![], "at {quiet}");
    }
    assert_eq!(gw.gateway.scheduler().next_due()[0].at, tuesday(7, 0));
    assert_eq!(
        gw.tick(tuesday(7, 0)).await,
        ticked("hb", "heartbeat", TickOutcome::Started),
        "runs when they end"
    );
    gw.settle().await;
    assert_eq!(fake.requests().len(), 2, "none in the night");
    let transcript = gw.transcript(PRIVATE).await;
    assert_eq!(with_reason(&transcript, "notice", "quiet-hours").len(), 1);
    assert!(
        gw.metrics()
            .await
            .contains("baton_scheduled_skips_total{reason=\"quiet-hours\"} 1\n")
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_iana_zone_keeps_quiet_hours_and_cron_on_local_time_across_a_dst_switch() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    // Berlin springs forward in the night of 2025-03-29/30: 02:00 CET becomes 03:00 CEST.
    let schedule = r#"heartbeat = { every = "30m", quiet_hours = "22:00-07:00" }

[[bots.cron]]
schedule = "0 9 * * *"
chat = "local:standup"
prompt = "Post the standup reminder."
"#;
    let text = config_text(&fake.base_url, &[], &bot(&fake, "hb", schedule))
        .replace("timezone = \"UTC\"", "timezone = \"Europe/Berlin\"");
    let gw = TestGateway::start(&text, &db).await;
    let at = |d, h, m| Utc.with_ymd_and_hms(2025, 3, d, h, m, 0).unwrap();
    let due = |job: &str| {
        gw.gateway
            .scheduler()
            .next_due()
            .into_iter()
            .find(|n| n.job == job)
            .unwrap()
    };

    gw.tick(at(29, 7, 30)).await;
    // 09:00 CET on Saturday is 08:00 UTC.
    assert_eq!(due("cron-0").at, at(29, 8, 0));
    let ticked = gw.tick(at(29, 8, 0)).await;
    assert!(
        ticked
            .iter()
            .any(|t| t.job == "cron-0" && t.outcome == TickOutcome::Started),
        "{ticked:?}"
    );
    gw.settle().await;
    // 09:00 CEST on Sunday is 07:00 UTC: an hour earlier in UTC, the same on the wall.
    assert_eq!(due("cron-0").at, at(30, 7, 0));
    assert_eq!(
        due("cron-0").local.to_rfc3339(),
        "2025-03-30T09:00:00+02:00"
    );

    // 22:00 CET: quiet until 07:00 on Sunday's wall clock, which is CEST by then (05:00 UTC).
    let ticked = gw.tick(at(29, 21, 0)).await;
    assert!(
        ticked
            .iter()
            .any(|t| t.job == "heartbeat"
                && t.outcome == TickOutcome::Skipped(SkipReason::QuietHours)),
        "{ticked:?}"
    );
    assert_eq!(due("heartbeat").at, at(30, 5, 0));
    let night: Vec<Ticked> = gw.tick(at(30, 4, 59)).await;
    assert!(night.iter().all(|t| t.job != "heartbeat"), "{night:?}");
    let morning = gw.tick(at(30, 5, 0)).await;
    assert!(
        morning
            .iter()
            .any(|t| t.job == "heartbeat" && t.outcome == TickOutcome::Started),
        "runs when they end: {morning:?}"
    );
    gw.settle().await;
    gw.stop().await;
}
