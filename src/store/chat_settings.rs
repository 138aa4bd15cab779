//! Per-chat overrides set by admin commands (`/activation`, `/pause`), durable and cached.
//!
//! Every inbound event asks for its chat's settings, so they are served from memory. The cache
//! holds every chat with an override (a handful: admins set them by hand), loaded at open, and
//! is updated on the writer thread right after each commit, in commit order: it never shows a
//! setting that is not saved, and two quick changes cannot land in the wrong order.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rusqlite::Connection;
use serde::Serialize;

use super::stored_name::parse_optional_column;
use super::{Store, StoreError};
use baton_contract::ChatKey;

use crate::bot_id::BotId;

stored_name! {
    /// When a bot takes a turn in a group: `[chats_default]`/`[[chats]]` `activation`, and a
    /// chat's `/baton activation` kept here.
    Activation, "activation" {
        /// Only when structurally mentioned (or replied to).
        Mention = "mention",
        /// On every message.
        Always = "always",
    }
}

/// A chat's admin overrides.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ChatSettings {
    /// Activation override; `None` keeps the config's.
    pub activation: Option<Activation>,
    /// Paused bot ids, sorted; `"*"` pauses every bot.
    pub paused: Vec<String>,
}

impl ChatSettings {
    /// Whether `bot` is paused here (by id, or because every bot is).
    pub fn is_paused(&self, bot: &BotId) -> bool {
        self.paused.iter().any(|p| p == "*" || p == bot.as_str())
    }
}

/// The in-memory copy of the chat settings tables.
#[derive(Debug, Default)]
pub(crate) struct SettingsCache {
    chats: RwLock<HashMap<String, ChatSettings>>,
}

impl SettingsCache {
    /// Loads every chat with an override.
    pub(crate) fn load(conn: &Connection) -> Result<Self, StoreError> {
        let mut chats: HashMap<String, ChatSettings> = HashMap::new();
        let mut stmt = conn.prepare("SELECT chat_key, activation FROM chat_settings")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, parse_optional_column(r, 1)?))
        })?;
        for row in rows {
            let (chat, activation) = row?;
            chats.entry(chat).or_default().activation = activation;
        }
        let mut stmt =
            conn.prepare("SELECT chat_key, bot FROM chat_paused ORDER BY chat_key, bot")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?)))?;
        for row in rows {
            let (chat, bot) = row?;
            chats.entry(chat).or_default().paused.push(bot);
        }
        Ok(SettingsCache {
            chats: RwLock::new(chats),
        })
    }

    fn get(&self, chat_key: &str) -> ChatSettings {
        let chats = self.chats.read().unwrap_or_else(|p| p.into_inner());
        chats.get(chat_key).cloned().unwrap_or_default()
    }

    fn put(&self, chat_key: String, settings: ChatSettings) {
        let mut chats = self.chats.write().unwrap_or_else(|p| p.into_inner());
        if settings == ChatSettings::default() {
            chats.remove(&chat_key);
        } else {
            chats.insert(chat_key, settings);
        }
    }
}

/// Reads one chat's settings inside a write job (the value the cache gets after the commit).
fn load_one(conn: &Connection, chat_key: &str) -> rusqlite::Result<ChatSettings> {
    let activation = conn
        .prepare_cached("SELECT (SELECT activation FROM chat_settings WHERE chat_key = ?1)")?
        .query_row([chat_key], |r| Ok(parse_optional_column(r, 0)?))?;
    let paused = conn
        .prepare_cached("SELECT bot FROM chat_paused WHERE chat_key = ?1 ORDER BY bot")?
        .query_map([chat_key], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(ChatSettings { activation, paused })
}

impl Store {
    /// Sets the chat's activation override; `None` goes back to the config's.
    pub async fn set_activation(
        &self,
        chat_key: &ChatKey,
        activation: Option<Activation>,
    ) -> Result<(), StoreError> {
        let chat = chat_key.as_str().to_owned();
        self.update_settings(chat, move |conn, chat| match activation {
            Some(a) => conn
                .prepare_cached(
                    "INSERT INTO chat_settings (chat_key, activation) VALUES (?1, ?2)
                     ON CONFLICT (chat_key) DO UPDATE SET activation = excluded.activation",
                )?
                .execute((chat, a.as_str())),
            None => conn
                .prepare_cached("DELETE FROM chat_settings WHERE chat_key = ?1")?
                .execute([chat]),
        })
        .await
    }

    /// Pauses or resumes `bot` in the chat (`"*"` = every bot). Resuming `"*"` resumes every
    /// bot, including those paused by name; resuming one bot while `"*"` is paused leaves it
    /// paused.
    pub async fn set_paused(
        &self,
        chat_key: &ChatKey,
        bot: &str,
        paused: bool,
    ) -> Result<(), StoreError> {
        let chat = chat_key.as_str().to_owned();
        let bot = bot.to_owned();
        self.update_settings(chat, move |conn, chat| match (paused, bot.as_str()) {
            (true, _) => conn
                .prepare_cached(
                    "INSERT INTO chat_paused (chat_key, bot) VALUES (?1, ?2)
                     ON CONFLICT DO NOTHING",
                )?
                .execute((chat, &bot)),
            (false, "*") => conn
                .prepare_cached("DELETE FROM chat_paused WHERE chat_key = ?1")?
                .execute([chat]),
            (false, _) => conn
                .prepare_cached("DELETE FROM chat_paused WHERE chat_key = ?1 AND bot = ?2")?
                .execute((chat, &bot)),
        })
        .await
    }

    /// The chat's overrides (defaults when it has none), from memory.
    pub async fn chat_settings(&self, chat_key: &ChatKey) -> Result<ChatSettings, StoreError> {
        Ok(self.inner.settings.get(chat_key.as_str()))
    }

    /// Runs `change` in the writer, then puts the chat's saved settings into the cache.
    async fn update_settings(
        &self,
        chat: String,
        change: impl FnOnce(&Connection, &str) -> rusqlite::Result<usize> + Send + 'static,
    ) -> Result<(), StoreError> {
        let cache = Arc::clone(&self.inner.settings);
        self.sqlite_write_then(
            move |conn| {
                change(conn, &chat)?;
                Ok((load_one(conn, &chat)?, chat))
            },
            move |(settings, chat)| cache.put(chat.clone(), settings.clone()),
        )
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slack(chat: &str) -> ChatKey {
        ChatKey::new(baton_contract::Platform::Slack, &chat.into(), None)
    }

    #[test]
    fn star_pauses_everyone() {
        let s = ChatSettings {
            activation: None,
            paused: vec!["*".into()],
        };
        assert!(s.is_paused(&"snark".parse().unwrap()) && s.is_paused(&"caid".parse().unwrap()));
        let s = ChatSettings {
            activation: None,
            paused: vec!["caid".into()],
        };
        assert!(!s.is_paused(&"snark".parse().unwrap()) && s.is_paused(&"caid".parse().unwrap()));
    }

    #[tokio::test]
    async fn cache_reflects_writes_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let path = path.to_str().unwrap();
        let store = Store::open(path).await.unwrap();
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            ChatSettings::default()
        );

        store
            .set_activation(&slack("C1"), Some(Activation::Always))
            .await
            .unwrap();
        store.set_paused(&slack("C1"), "snark", true).await.unwrap();
        store.set_paused(&slack("C1"), "caid", true).await.unwrap();
        store.set_paused(&slack("C1"), "caid", true).await.unwrap(); // twice: once
        store.set_paused(&slack("C2"), "*", true).await.unwrap();
        let c1 = store.chat_settings(&slack("C1")).await.unwrap();
        assert_eq!(c1.activation, Some(Activation::Always));
        assert_eq!(c1.paused, ["caid", "snark"]);
        store.close().await.unwrap();
        drop(store);

        let store = Store::open(path).await.unwrap();
        assert_eq!(store.chat_settings(&slack("C1")).await.unwrap(), c1);
        assert!(
            store
                .chat_settings(&slack("C2"))
                .await
                .unwrap()
                .is_paused(&"anyone".parse().unwrap())
        );

        store
            .set_paused(&slack("C1"), "snark", false)
            .await
            .unwrap();
        store.set_activation(&slack("C1"), None).await.unwrap();
        let c1 = store.chat_settings(&slack("C1")).await.unwrap();
        assert_eq!(
            c1,
            ChatSettings {
                activation: None,
                paused: vec!["caid".into()]
            }
        );
        store.set_paused(&slack("C1"), "*", false).await.unwrap();
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            ChatSettings::default()
        );

        // What the cache says is what the file says.
        store.close().await.unwrap();
        let store = Store::open(path).await.unwrap();
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            ChatSettings::default()
        );
        assert!(
            store
                .chat_settings(&slack("C2"))
                .await
                .unwrap()
                .is_paused(&"x".parse().unwrap())
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_changes_leave_the_cache_equal_to_the_database() {
        let store = Store::open(":memory:").await.unwrap();
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let bot = format!("b{}", i % 5);
                    store
                        .set_paused(&slack("C1"), &bot, i % 2 == 0)
                        .await
                        .unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let cached = store.chat_settings(&slack("C1")).await.unwrap();
        let saved = store
            .sqlite_read(|c| load_one(c, "slack:C1"))
            .await
            .unwrap();
        assert_eq!(cached, saved);
    }
}
