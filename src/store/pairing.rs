//! DM pairing (`dm_policy = "pairing"`): an unknown sender gets a one-time code, and an admin
//! running `baton pairing approve CODE` lets them in.
//!
//! A sender keeps the same code until it is approved, so asking twice does not invalidate the
//! code they already passed on. Codes avoid look-alike characters (no `0`/`O`, `1`/`I`) because
//! people read them out and retype them.

use rand::Rng;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::{Store, StoreError};

/// Characters a code is made of: uppercase letters and digits, minus look-alikes.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// Characters per code.
const CODE_LEN: usize = 6;

/// Where a DM sender stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Pairing {
    /// Approved: let them in.
    Paired,
    /// Not approved yet; `code` is what an admin must approve.
    Pending {
        /// The sender's pairing code.
        code: String,
        /// Whether the code was created by this call (tell the sender once).
        new: bool,
    },
}

/// A pairing, for `baton pairing list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairingRecord {
    /// Platform name.
    pub platform: String,
    /// Platform user id.
    pub user: String,
    /// The code they were given.
    pub code: String,
    /// Whether an admin approved it.
    pub approved: bool,
    /// When the code was created, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

fn new_code(conn: &Connection) -> rusqlite::Result<String> {
    let mut rng = rand::rng();
    loop {
        let code: String = (0..CODE_LEN)
            .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
            .collect();
        let taken: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM pairing WHERE code = ?1)")?
            .query_row([&code], |r| r.get(0))?;
        if !taken {
            return Ok(code);
        }
    }
}

impl Store {
    /// Paired if approved; else the pending code (creating a random 6-char uppercase alphanumeric code on first ask, `new: true`).
    pub async fn pairing(
        &self,
        platform: &str,
        user: &str,
        now_ms: i64,
    ) -> Result<Pairing, StoreError> {
        let (platform, user) = (platform.to_owned(), user.to_owned());
        self.write(move |conn| {
            let existing: Option<(String, bool)> = conn
                .prepare_cached(
                    "SELECT code, approved FROM pairing WHERE platform = ?1 AND user = ?2",
                )?
                .query_row((&platform, &user), |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match existing {
                Some((_, true)) => Ok(Pairing::Paired),
                Some((code, false)) => Ok(Pairing::Pending { code, new: false }),
                None => {
                    let code = new_code(conn)?;
                    conn.prepare_cached(
                        "INSERT INTO pairing (platform, user, code, created_ms)
                         VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute((&platform, &user, &code, now_ms))?;
                    Ok(Pairing::Pending { code, new: true })
                }
            }
        })
        .await
    }

    /// Approve a pending code; returns (platform, user) or None for an unknown code.
    ///
    /// Case and surrounding spaces are ignored. Approving an already approved code returns
    /// its sender again.
    pub async fn approve_pairing(
        &self,
        code: &str,
        now_ms: i64,
    ) -> Result<Option<(String, String)>, StoreError> {
        let code = code.trim().to_ascii_uppercase();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE pairing SET approved = 1, approved_ms = coalesce(approved_ms, ?2)
                 WHERE code = ?1
                 RETURNING platform, user",
            )?
            .query_row((&code, now_ms), |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
        })
        .await
    }

    /// Every pairing, pending ones first, then oldest first.
    pub async fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT platform, user, code, approved, created_ms FROM pairing
                 ORDER BY approved, created_ms, platform, user",
            )?
            .query_map([], |r| {
                Ok(PairingRecord {
                    platform: r.get(0)?,
                    user: r.get(1)?,
                    code: r.get(2)?,
                    approved: r.get(3)?,
                    created_ms: r.get(4)?,
                })
            })?
            .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn code_flow_from_first_ask_to_approval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let path = path.to_str().unwrap();
        let store = Store::open(path).await.unwrap();

        let Pairing::Pending { code, new: true } = store.pairing("slack", "U1", 10).await.unwrap()
        else {
            panic!("first ask must create a code");
        };
        assert_eq!(code.len(), 6);
        assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
        // Asking again: same code, not new.
        assert_eq!(
            store.pairing("slack", "U1", 20).await.unwrap(),
            Pairing::Pending {
                code: code.clone(),
                new: false
            }
        );
        let Pairing::Pending { code: other, .. } =
            store.pairing("discord", "U1", 30).await.unwrap()
        else {
            panic!("another platform is another sender");
        };
        assert_ne!(other, code);

        assert_eq!(store.approve_pairing("NOPE42", 40).await.unwrap(), None);
        assert_eq!(
            store
                .approve_pairing(&format!(" {} ", code.to_lowercase()), 40)
                .await
                .unwrap(),
            Some(("slack".to_owned(), "U1".to_owned()))
        );
        store.close().await.unwrap();

        let store = Store::open(path).await.unwrap();
        assert_eq!(
            store.pairing("slack", "U1", 50).await.unwrap(),
            Pairing::Paired
        );
        let list = store.pairings().await.unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            (list[0].platform.as_str(), list[0].approved),
            ("discord", false)
        );
        assert_eq!(
            list[1],
            PairingRecord {
                platform: "slack".into(),
                user: "U1".into(),
                code,
                approved: true,
                created_ms: 10,
            }
        );
    }
}
