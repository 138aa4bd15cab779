//! Feishu/Lark, from outside: a webhook request body (plain, or `{"encrypt": "<base64>"}`) as
//! `webhook.rs` opens it, and the event inside it as `normalize.rs` reads it. The input is read
//! three ways: as the body for an account with an Encrypt Key, as the body for one without, and
//! as the *plaintext* of an encrypted event (encrypted here the way Feishu does, so the fuzzer
//! reaches the parse behind the decryption, which random ciphertext never would). The
//! `X-Lark-Signature` check runs too, correctly signed so its timestamp check is reached: the
//! first two lines are the timestamp and nonce headers, the rest the body.
#![no_main]

use baton_contract::{AccountId, Platform};
use baton_feishu::normalize::{self, Me};
use baton_feishu::{crypto, signature, webhook};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// The Encrypt Key of the fixtures' encrypted event (`event_encrypted_and_signed_example.json`).
const KEY: &str = "test_encrypt_key_123";
/// 2023-11-14, the time of the fixtures' signed example.
const NOW: i64 = 1_700_000_000;

fuzz_target!(|data: &[u8]| {
    let account = AccountId::from("fuzz");
    let posted = |id: &str| id.starts_with("om_");
    let sibling = |name: &str| (name == "Sibling").then(|| "ou_sibling".to_owned());
    let me = Me {
        platform: Platform::Feishu,
        account: &account,
        app_id: "cli_9f5343c580712544",
        open_id: "ou_bot00000000000000000000000000001",
        posted: &posted,
        sibling: &sibling,
    };
    let event = |body: Value| {
        let _ = signature::check_token("fuzz-token", &body);
        let _ = normalize::event_id(&body);
        if let Ok(event) = normalize::message_receive(&me, &body) {
            // The verification token is a secret: it never reaches the transcript.
            assert!(event.raw.get("token").is_none());
            assert!(event.raw.pointer("/header/token").is_none());
        }
    };

    for key in [Some(KEY), None] {
        if let Ok(body) = webhook::open(key, data) {
            event(body);
        }
    }

    let mut lines = data.splitn(3, |&b| b == b'\n');
    if let (Some(Ok(ts)), Some(Ok(nonce)), Some(body)) = (
        lines.next().map(std::str::from_utf8),
        lines.next().map(std::str::from_utf8),
        lines.next(),
    ) {
        let signed = signature::sign(ts.trim(), nonce.trim(), KEY, body);
        let verdict = signature::verify(KEY, Some(ts), Some(nonce), Some(&signed), body, NOW);
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
    }

    let plaintext = String::from_utf8_lossy(data);
    let encrypted = crypto::encrypt(KEY, [7; 16], &plaintext);
    assert_eq!(crypto::decrypt(KEY, &encrypted).as_deref(), Ok(&*plaintext));
    let body = json!({ "encrypt": encrypted }).to_string();
    if let Ok(body) = webhook::open(Some(KEY), body.as_bytes()) {
        event(body);
    }
});
