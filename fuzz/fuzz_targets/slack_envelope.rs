//! Slack, from outside: one Socket Mode websocket text frame (an envelope whose `payload` is an
//! Events API body or a slash command), an Events API request body, or a slash command's
//! form-urlencoded body. The same bytes are read each way, as `socket.rs` and `events_http.rs`
//! read them, and normalized. The request signature check runs on them too: the first two
//! lines are the `X-Slack-Request-Timestamp` and `X-Slack-Signature` headers, the rest the body.
#![no_main]

use baton_contract::AccountId;
use baton_slack::normalize::{self, Identity};
use baton_slack::signature;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// 2020-07-28, the time of the fixtures' signed example.
const NOW: i64 = 1_595_926_230;

fuzz_target!(|data: &[u8]| {
    let account = AccountId::from("fuzz");
    let me = Identity {
        user_id: "U111".into(),
        bot_id: Some("B111".into()),
    };

    // A Socket Mode envelope, or an Events API body.
    if let Ok(envelope) = serde_json::from_slice::<Value>(data) {
        let mut app = None;
        match envelope.get("type").and_then(Value::as_str) {
            Some("events_api") => event(&account, &me, &mut app, &envelope["payload"]),
            Some("slash_commands") => command(&account, &mut app, &envelope["payload"]),
            Some("event_callback") => event(&account, &me, &mut app, &envelope),
            _ => {}
        }
    }

    // A slash command over HTTP: form fields, as `events_http.rs` turns them into an object.
    let fields: Map<String, Value> = url::form_urlencoded::parse(data)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    command(&account, &mut None, &Value::Object(fields));

    // The signature headers, as sent (almost always a mismatch) and correctly signed (so the
    // timestamp check runs on whatever the timestamp is).
    let mut lines = data.splitn(3, |&b| b == b'\n');
    let (Some(ts), Some(sig)) = (lines.next(), lines.next()) else {
        return;
    };
    let body = lines.next().unwrap_or_default();
    let (Ok(ts), Ok(sig)) = (std::str::from_utf8(ts), std::str::from_utf8(sig)) else {
        return;
    };
    let _ = signature::verify(SECRET, Some(ts), Some(sig), body, NOW);
    let signed = signature::sign(SECRET, ts.trim(), body);
    let verdict = signature::verify(SECRET, Some(ts), Some(&signed), body, NOW);
    if verdict.is_ok() {
        let ts: i64 = ts
            .trim()
            .parse()
            .expect("an accepted timestamp is a number");
        assert!(
            (NOW - 300..=NOW + 300).contains(&ts),
            "stale timestamp {ts} accepted"
        );
    }
});

fn event(account: &AccountId, me: &Identity, app: &mut Option<String>, body: &Value) {
    if normalize::check_app(app, body).is_err() {
        return;
    }
    if let Ok(event) = normalize::event_callback(account, me, body) {
        let channel = body.pointer("/event/channel").and_then(Value::as_str);
        assert_eq!(Some(event.chat.as_str()), channel);
    }
}

fn command(account: &AccountId, app: &mut Option<String>, fields: &Value) {
    if normalize::check_app(app, fields).is_err() {
        return;
    }
    if let Ok(event) = normalize::slash_command(account, fields) {
        assert!(
            event.raw.is_null(),
            "the response_url must stay out of the transcript"
        );
    }
}
