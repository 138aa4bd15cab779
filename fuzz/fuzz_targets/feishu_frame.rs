//! Feishu/Lark, from outside: the long connection's binary websocket messages, each one
//! protobuf `pbbp2.Frame`, in a row, as `ws.rs` reads them: control frames (a `pong` carries
//! the client config as JSON), data frames reassembled from their fragments
//! (`message_id`/`sum`/`seq` headers), and each whole event's JSON.
//!
//! Input format: frames back to back, each prefixed with its length as two big-endian bytes
//! (`fuzz/seeds/feishu_frame/` holds the fixtures' frames in this form).
#![no_main]

use baton_feishu::crypto;
use baton_feishu::fragments::{Assembled, Fragments};
use baton_feishu::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The Encrypt Key of the fixtures' encrypted event (`event_encrypted_and_signed_example.json`).
const KEY: &str = "test_encrypt_key_123";

fuzz_target!(|data: &[u8]| {
    let mut fragments = Fragments::default();
    let mut rest = data;
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (bytes, after) = tail.split_at(len);
        rest = after;
        let Ok(frame) = Frame::from_bytes(bytes) else {
            continue;
        };
        // What we send back must read as what we meant.
        assert_eq!(
            Frame::from_bytes(&frame.to_bytes()).ok().as_ref(),
            Some(&frame)
        );
        match frame.method {
            METHOD_CONTROL => {
                if frame.kind() == "pong"
                    && let Some(config) = frame
                        .payload
                        .as_deref()
                        .and_then(|p| serde_json::from_slice::<Value>(p).ok())
                {
                    let _ = config["PingInterval"].as_u64();
                }
            }
            METHOD_DATA => {
                let ack = frame.ack(200, 12);
                assert_eq!(Frame::from_bytes(&ack.to_bytes()).ok(), Some(ack));
                if let Assembled::Complete(payload) = fragments.add_frame(&frame) {
                    event(&payload);
                }
                assert!(fragments.pending() <= 64, "unfinished events pile up");
            }
            _ => {}
        }
    }
});

/// A whole event, as `ws.rs` hands it on: JSON, decrypted when it is `{"encrypt": ...}`.
fn event(payload: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(payload) else {
        return;
    };
    if let Some(encrypted) = body.get("encrypt").and_then(Value::as_str)
        && let Ok(plain) = crypto::decrypt(KEY, encrypted)
    {
        let _ = serde_json::from_str::<Value>(&plain);
    }
}
