//! Proof that a webhook request came from Feishu: the `X-Lark-Signature` header and the
//! verification token inside the event.
//!
//! The signature is plain SHA-256 (not an HMAC) of `timestamp + nonce + encrypt_key + raw body`,
//! hex-encoded, and Feishu sends it only when the app has an Encrypt Key (Go SDK
//! `event/event.go`, Python SDK `_verify_sign`). It is checked over the raw bytes before the body
//! is parsed, in constant time, with the 5-minute window on the timestamp that baton asks of
//! every webhook. The verification token sits in the event itself (`header.token` in schema 2.0,
//! `token` in 1.0 and in `url_verification`), so it is checked after decryption.

use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Requests signed longer ago (or further ahead) than this are refused.
pub const MAX_AGE_SECONDS: i64 = 5 * 60;

/// Why a request was refused. None of them carries a secret or the expected value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// One of `X-Lark-Signature`, `X-Lark-Request-Timestamp`, `X-Lark-Request-Nonce` is absent.
    #[error(
        "missing X-Lark-Signature, X-Lark-Request-Timestamp or X-Lark-Request-Nonce; \
         with an Encrypt Key set Feishu signs every event"
    )]
    Missing,
    /// The timestamp is not a number.
    #[error("X-Lark-Request-Timestamp is not a Unix time in seconds")]
    BadTimestamp,
    /// The timestamp is more than five minutes from now (a replay, or a skewed clock).
    #[error("the request timestamp is more than 5 minutes off; check the server clock")]
    Stale,
    /// The signature does not match: wrong Encrypt Key, or a forged or altered request.
    #[error("the signature does not match; check the account's encrypt_key_env")]
    Mismatch,
}

/// The verification token is absent or wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the verification token does not match; check the account's verification_token_env \
     (Events and Callbacks > Encryption Strategy in the developer console)"
)]
pub struct TokenMismatch;

/// The `X-Lark-Signature` value for `body` sent at `timestamp` with `nonce`. Public so fakes and
/// tests can sign requests.
pub fn sign(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(timestamp.as_bytes());
    hash.update(nonce.as_bytes());
    hash.update(encrypt_key.as_bytes());
    hash.update(body);
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Check the signature headers for `body` at time `now` (Unix seconds).
pub fn verify(
    encrypt_key: &str,
    timestamp: Option<&str>,
    nonce: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(nonce), Some(signature)) = (timestamp, nonce, signature) else {
        return Err(SignatureError::Missing);
    };
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    let expected = sign(timestamp.trim(), nonce.trim(), encrypt_key, body);
    let given = signature.trim().to_ascii_lowercase();
    if expected.as_bytes().ct_eq(given.as_bytes()).unwrap_u8() != 1 {
        return Err(SignatureError::Mismatch);
    }
    // `abs_diff`: a timestamp near i64::MIN or MAX must be stale, not an overflow.
    if now.abs_diff(ts) > MAX_AGE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

/// The verification token an event carries: `header.token` (schema 2.0), else `token`
/// (schema 1.0 and `url_verification`).
pub fn token_of(event: &Value) -> Option<&str> {
    event
        .pointer("/header/token")
        .and_then(Value::as_str)
        .or_else(|| event.get("token").and_then(Value::as_str))
}

/// Check the event's verification token against the account's, in constant time.
pub fn check_token(expected: &str, event: &Value) -> Result<(), TokenMismatch> {
    let given = token_of(event).ok_or(TokenMismatch)?;
    if expected.as_bytes().ct_eq(given.as_bytes()).unwrap_u8() == 1 {
        Ok(())
    } else {
        Err(TokenMismatch)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn example() -> Value {
        let path = format!(
            "{}/fixtures/event_encrypted_and_signed_example.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_signed_example_verifies() {
        let e = example();
        let key = e["encrypt_key"].as_str().unwrap();
        let body = e["raw_body"].as_str().unwrap().as_bytes();
        let h = &e["headers"];
        let ts = h["X-Lark-Request-Timestamp"].as_str().unwrap();
        let nonce = h["X-Lark-Request-Nonce"].as_str().unwrap();
        let sig = h["X-Lark-Signature"].as_str().unwrap();
        assert_eq!(sign(ts, nonce, key, body), sig);
        let now: i64 = ts.parse().unwrap();
        assert_eq!(
            verify(key, Some(ts), Some(nonce), Some(sig), body, now + 30),
            Ok(())
        );
    }

    #[test]
    fn tampering_a_wrong_key_staleness_and_absence_are_refused() {
        let e = example();
        let key = e["encrypt_key"].as_str().unwrap();
        let body = e["raw_body"].as_str().unwrap();
        let h = &e["headers"];
        let ts = h["X-Lark-Request-Timestamp"].as_str().unwrap();
        let nonce = h["X-Lark-Request-Nonce"].as_str().unwrap();
        let sig = h["X-Lark-Signature"].as_str().unwrap();
        let now: i64 = ts.parse().unwrap();
        let v = |key: &str, body: &str, sig: Option<&str>, now: i64| {
            verify(key, Some(ts), Some(nonce), sig, body.as_bytes(), now)
        };
        assert_eq!(
            v(key, &format!("{body} "), Some(sig), now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            v("wrong", body, Some(sig), now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            v(key, body, Some(sig), now + MAX_AGE_SECONDS + 1),
            Err(SignatureError::Stale)
        );
        assert_eq!(v(key, body, None, now), Err(SignatureError::Missing));
    }

    /// Found with `fuzz/` (`feishu_decrypt`): a correctly signed timestamp at the edge of i64
    /// overflowed the age check instead of being refused as stale.
    #[test]
    fn fuzz_regression_an_extreme_signed_timestamp_is_stale() {
        let now = 1_700_000_000;
        for ts in ["-9223372036854775808", "9223372036854775807"] {
            let sig = sign(ts, "nonce", "key", b"body");
            assert_eq!(
                verify("key", Some(ts), Some("nonce"), Some(&sig), b"body", now),
                Err(SignatureError::Stale)
            );
        }
    }

    #[test]
    fn the_token_is_read_from_v2_header_or_v1_top_level() {
        let v2 = json!({"schema": "2.0", "header": {"token": "tok"}, "event": {}});
        let v1 = json!({"uuid": "u", "token": "tok", "event": {"type": "message"}});
        let challenge = json!({"challenge": "c", "token": "tok", "type": "url_verification"});
        for event in [&v2, &v1, &challenge] {
            assert_eq!(check_token("tok", event), Ok(()));
            assert_eq!(check_token("other", event), Err(TokenMismatch));
        }
        assert_eq!(
            check_token("tok", &json!({"event": {}})),
            Err(TokenMismatch)
        );
    }
}
