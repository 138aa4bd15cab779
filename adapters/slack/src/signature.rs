//! Slack's `v0` request signature: `v0=` + hex HMAC-SHA256(signing secret, `v0:<ts>:<raw body>`).
//!
//! Checked over the raw body *before* anything parses it, in constant time, and with a 5-minute
//! window on the timestamp so a captured request cannot be replayed later. The clock is a
//! parameter so the official worked example (signed in 2018) can be checked in a unit test.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Requests signed longer ago (or further ahead) than this are refused, as Slack's SDKs do.
pub const MAX_AGE_SECONDS: i64 = 5 * 60;

/// Why a request's signature was refused. None of them carries the secret or the expected hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// `X-Slack-Signature` or `X-Slack-Request-Timestamp` is absent.
    #[error("missing X-Slack-Signature or X-Slack-Request-Timestamp header")]
    Missing,
    /// The timestamp is not a number.
    #[error("X-Slack-Request-Timestamp is not a Unix time in seconds")]
    BadTimestamp,
    /// The timestamp is more than five minutes from now (a replay, or a skewed clock).
    #[error("the request timestamp is more than 5 minutes old; check the server clock")]
    Stale,
    /// The signature does not match: wrong signing secret, or a forged or altered request.
    #[error("the signature does not match; check the account's signing_secret_env")]
    Mismatch,
}

/// Check `signature` (the `X-Slack-Signature` value) for `body` signed at `timestamp`, at time
/// `now` (Unix seconds).
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureError::Missing);
    };
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    let expected = sign(secret, timestamp.trim(), body);
    if expected
        .as_bytes()
        .ct_eq(signature.trim().as_bytes())
        .unwrap_u8()
        != 1
    {
        return Err(SignatureError::Mismatch);
    }
    // `abs_diff`: a timestamp near i64::MIN or MAX must be stale, not an overflow.
    if now.abs_diff(ts) > MAX_AGE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

/// The `v0=…` signature of `body` at `timestamp`. Public so fakes and tests can sign requests.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(3 + digest.len() * 2);
    out.push_str("v0=");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector() -> serde_json::Value {
        let text = include_str!("../fixtures/signature_v0_worked_example.json");
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn the_official_worked_example_verifies() {
        let v = vector();
        let secret = v["signing_secret"].as_str().unwrap();
        let ts = v["headers"]["X-Slack-Request-Timestamp"].as_str().unwrap();
        let body = v["raw_body"].as_str().unwrap();
        let sig = v["headers"]["X-Slack-Signature"].as_str().unwrap();
        let now: i64 = ts.parse().unwrap();
        assert_eq!(sign(secret, ts, body.as_bytes()), sig);
        assert_eq!(
            verify(secret, Some(ts), Some(sig), body.as_bytes(), now + 10),
            Ok(())
        );
    }

    #[test]
    fn tampering_staleness_and_absence_are_refused() {
        let v = vector();
        let secret = v["signing_secret"].as_str().unwrap();
        let ts = v["headers"]["X-Slack-Request-Timestamp"].as_str().unwrap();
        let body = v["raw_body"].as_str().unwrap();
        let sig = v["headers"]["X-Slack-Signature"].as_str().unwrap();
        let now: i64 = ts.parse().unwrap();
        let altered = format!("{body}&x=1");
        assert_eq!(
            verify(secret, Some(ts), Some(sig), altered.as_bytes(), now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify("wrong", Some(ts), Some(sig), body.as_bytes(), now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(
                secret,
                Some(ts),
                Some(sig),
                body.as_bytes(),
                now + MAX_AGE_SECONDS + 1
            ),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(secret, None, Some(sig), body.as_bytes(), now),
            Err(SignatureError::Missing)
        );
    }

    /// Found with `fuzz/` (`slack_envelope`): a correctly signed timestamp at the edge of i64
    /// overflowed the age check instead of being refused as stale.
    #[test]
    fn fuzz_regression_an_extreme_signed_timestamp_is_stale() {
        let now = 1_595_926_230;
        for ts in ["-9223372036854775808", "9223372036854775807"] {
            let sig = sign("secret", ts, b"body");
            assert_eq!(
                verify("secret", Some(ts), Some(&sig), b"body", now),
                Err(SignatureError::Stale)
            );
        }
    }
}
