//! Event encryption: with an Encrypt Key set on the app, Feishu posts `{"encrypt": "<base64>"}`
//! instead of the event.
//!
//! The scheme is the official SDKs' (node `utils/aes-cipher.ts`, Go `core/utils.go`): the AES-256
//! key is SHA-256 of the Encrypt Key, the decoded bytes start with the 16-byte IV, the rest is
//! AES-256-CBC with PKCS#7 padding, and the plaintext is UTF-8 JSON. [`encrypt`] exists so the
//! fake platform in the tests can produce bodies the way Feishu does.

use aes::Aes256;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockModeDecrypt, BlockModeEncrypt, KeyIvInit};
use sha2::{Digest, Sha256};

/// Why an `encrypt` field could not be read. None of them carries the key or the plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// The field is not base64.
    #[error("the `encrypt` field is not base64")]
    NotBase64,
    /// Too short to hold an IV and one block.
    #[error("the `encrypt` field is too short to be an encrypted event")]
    TooShort,
    /// The padding is wrong: almost always the wrong Encrypt Key.
    #[error("the event does not decrypt; check the account's encrypt_key_env")]
    WrongKey,
    /// It decrypted, but not to UTF-8 text.
    #[error("the decrypted event is not UTF-8 text; check the account's encrypt_key_env")]
    NotText,
}

const IV_LEN: usize = 16;

fn key_of(encrypt_key: &str) -> [u8; 32] {
    Sha256::digest(encrypt_key.as_bytes()).into()
}

/// Decrypt the value of an `{"encrypt": ...}` body into the event's JSON text.
pub fn decrypt(encrypt_key: &str, encrypted: &str) -> Result<String, DecryptError> {
    let raw = STANDARD
        .decode(encrypted.trim())
        .map_err(|_| DecryptError::NotBase64)?;
    if raw.len() < IV_LEN * 2 || !(raw.len() - IV_LEN).is_multiple_of(IV_LEN) {
        return Err(DecryptError::TooShort);
    }
    let (iv, ciphertext) = raw.split_at(IV_LEN);
    let key = key_of(encrypt_key);
    let plain = cbc::Decryptor::<Aes256>::new_from_slices(&key, iv)
        .map_err(|_| DecryptError::TooShort)?
        .decrypt_padded_vec::<Pkcs7>(ciphertext)
        .map_err(|_| DecryptError::WrongKey)?;
    String::from_utf8(plain).map_err(|_| DecryptError::NotText)
}

/// Encrypt `plaintext` with `iv` the way Feishu does; returns the base64 `encrypt` value.
pub fn encrypt(encrypt_key: &str, iv: [u8; IV_LEN], plaintext: &str) -> String {
    let key = key_of(encrypt_key);
    let ciphertext = cbc::Encryptor::<Aes256>::new_from_slices(&key, &iv)
        .expect("a 32-byte key and a 16-byte IV")
        .encrypt_padded_vec::<Pkcs7>(plaintext.as_bytes());
    let mut out = iv.to_vec();
    out.extend_from_slice(&ciphertext);
    STANDARD.encode(out)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_official_decryption_vectors_decrypt() {
        let vectors = fixture("encrypt_key_decryption_vectors");
        let vectors = vectors["vectors"].as_array().unwrap();
        assert_eq!(vectors.len(), 2);
        for v in vectors {
            let plain = decrypt(
                v["encrypt_key"].as_str().unwrap(),
                v["encrypt"].as_str().unwrap(),
            )
            .unwrap();
            assert_eq!(plain, v["plaintext"].as_str().unwrap(), "{}", v["source"]);
        }
    }

    #[test]
    fn the_signed_example_decrypts_to_the_group_event() {
        let example = fixture("event_encrypted_and_signed_example");
        let body: Value = serde_json::from_str(example["raw_body"].as_str().unwrap()).unwrap();
        let plain = decrypt(
            example["encrypt_key"].as_str().unwrap(),
            body["encrypt"].as_str().unwrap(),
        )
        .unwrap();
        let event: Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(event, fixture("event_im_message_receive_v1_group_at_bot"));
    }

    #[test]
    fn encrypt_round_trips_and_matches_the_example() {
        let example = fixture("event_encrypted_and_signed_example");
        let body: Value = serde_json::from_str(example["raw_body"].as_str().unwrap()).unwrap();
        let key = example["encrypt_key"].as_str().unwrap();
        let plain = decrypt(key, body["encrypt"].as_str().unwrap()).unwrap();
        let iv: [u8; 16] = std::array::from_fn(|i| i as u8);
        assert_eq!(encrypt(key, iv, &plain), body["encrypt"].as_str().unwrap());
    }

    #[test]
    fn a_wrong_key_or_garbage_is_refused() {
        let v = &fixture("encrypt_key_decryption_vectors")["vectors"][0];
        let encrypted = v["encrypt"].as_str().unwrap();
        let err = decrypt("not-the-key", encrypted).unwrap_err();
        assert!(matches!(
            err,
            DecryptError::WrongKey | DecryptError::NotText
        ));
        assert_eq!(decrypt("k", "%%%"), Err(DecryptError::NotBase64));
        assert_eq!(decrypt("k", "AAAA"), Err(DecryptError::TooShort));
    }
}
