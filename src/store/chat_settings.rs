//! Per-chat overrides set by admin commands (`/activation`, `/pause`), durable and cached.
//!
//! Every inbound event asks for its chat's settings, so they are served from memory. The cache
//! holds every chat with an override (a handful: admins set them by hand), loaded at open, and
//! is updated on the writer thread right after each commit, in commit order: it never shows a
//! setting that is not saved, and two quick changes cannot land in the wrong order.
//!
//! With several instances on one PostgreSQL, a change made through another instance reaches
//! this one's cache through a notice ([`Store::follow_chat_settings`]): the chat's row is read
//! again after every notice about it, and every chat after notices may have been missed. Each
//! change announces itself, so the last read after the last change sees it, whatever the order
//! of reads before.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use super::notices::{Notice, Topic, announce_in};
use super::sql::{Db, DbError, Engine, args};
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
    pub(crate) fn load(db: Db<'_>) -> Result<Self, DbError> {
        let mut chats: HashMap<String, ChatSettings> = HashMap::new();
        let activations =
            db.query_map("SELECT chat_key, activation FROM chat_settings", &[], |r| {
                Ok((r.get::<String>(0)?, parse_optional_column(r, 1)?))
            })?;
        for (chat, activation) in activations {
            chats.entry(chat).or_default().activation = activation;
        }
        let paused = db.query_map(
            "SELECT chat_key, bot FROM chat_paused ORDER BY chat_key, bot",
            &[],
            |r| Ok((r.get::<String>(0)?, r.get(1)?)),
        )?;
        for (chat, bot) in paused {
            chats.entry(chat).or_default().paused.push(bot);
        }
        Ok(SettingsCache {
            chats: RwLock::new(chats),
        })
    }

    fn replace(&self, fresh: SettingsCache) {
        let fresh = fresh.chats.into_inner().unwrap_or_else(|p| p.into_inner());
        *self.chats.write().unwrap_or_else(|p| p.into_inner()) = fresh;
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
fn load_one(db: Db<'_>, chat_key: &str) -> Result<ChatSettings, DbError> {
    let activation = db.query_row(
        "SELECT (SELECT activation FROM chat_settings WHERE chat_key = ?1)",
        args![chat_key],
        |r| parse_optional_column(r, 0),
    )?;
    let paused = db.query_map(
        "SELECT bot FROM chat_paused WHERE chat_key = ?1 ORDER BY bot",
        args![chat_key],
        |r| r.get(0),
    )?;
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
        self.update_settings(chat, move |db, chat| match activation {
            Some(a) => db.execute(
                "INSERT INTO chat_settings (chat_key, activation) VALUES (?1, ?2)
                 ON CONFLICT (chat_key) DO UPDATE SET activation = excluded.activation",
                args![chat, a.as_str()],
            ),
            None => db.execute("DELETE FROM chat_settings WHERE chat_key = ?1", args![chat]),
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
        self.update_settings(chat, move |db, chat| match (paused, bot.as_str()) {
            (true, _) => db.execute(
                "INSERT INTO chat_paused (chat_key, bot) VALUES (?1, ?2)
                 ON CONFLICT DO NOTHING",
                args![chat, &bot],
            ),
            (false, "*") => db.execute("DELETE FROM chat_paused WHERE chat_key = ?1", args![chat]),
            (false, _) => db.execute(
                "DELETE FROM chat_paused WHERE chat_key = ?1 AND bot = ?2",
                args![chat, &bot],
            ),
        })
        .await
    }

    /// Resumes `bot` alone in the chat. Where every bot is paused (`"*"`), that pause becomes
    /// the own pause of each of `others` (the chat's other bots), so they stay paused; in one
    /// update, so no instance sees them resumed in between.
    pub async fn resume_alone(
        &self,
        chat_key: &ChatKey,
        bot: &str,
        others: Vec<String>,
    ) -> Result<(), StoreError> {
        let chat = chat_key.as_str().to_owned();
        let bot = bot.to_owned();
        self.update_settings(chat, move |db, chat| {
            let every = db.execute(
                "DELETE FROM chat_paused WHERE chat_key = ?1 AND bot = '*'",
                args![chat],
            )?;
            if every > 0 {
                for other in &others {
                    db.execute(
                        "INSERT INTO chat_paused (chat_key, bot) VALUES (?1, ?2)
                         ON CONFLICT DO NOTHING",
                        args![chat, other],
                    )?;
                }
            }
            db.execute(
                "DELETE FROM chat_paused WHERE chat_key = ?1 AND bot = ?2",
                args![chat, &bot],
            )
        })
        .await
    }

    /// The chat's overrides (defaults when it has none), from memory.
    pub async fn chat_settings(&self, chat_key: &ChatKey) -> Result<ChatSettings, StoreError> {
        Ok(self.inner.settings.get(chat_key.as_str()))
    }

    /// Until the store is dropped: keeps this instance's cache equal to the database while other
    /// instances change chat settings. On SQLite there are no others, and it returns at once.
    pub async fn follow_chat_settings(&self) {
        if self.engine() == Engine::Sqlite {
            return;
        }
        let mut notices = self.subscribe();
        loop {
            let read = match notices.next().await {
                Notice::Changed {
                    topic: Topic::ChatSettings,
                    key,
                } => {
                    let topic_key = key.clone();
                    self.read(move |db| load_one(db, &topic_key))
                        .await
                        .map(|settings| self.inner.settings.put(key, settings))
                }
                Notice::Missed => self
                    .read(SettingsCache::load)
                    .await
                    .map(|fresh| self.inner.settings.replace(fresh)),
                Notice::Changed { .. } => Ok(()),
            };
            if let Err(err) = read {
                tracing::error!(%err, "could not read chat settings changed by another instance; they apply here after the next change or a restart");
            }
        }
    }

    /// Runs `change` in the writer, then puts the chat's saved settings into the cache.
    async fn update_settings(
        &self,
        chat: String,
        mut change: impl FnMut(Db<'_>, &str) -> Result<usize, DbError> + Send + 'static,
    ) -> Result<(), StoreError> {
        let cache = Arc::clone(&self.inner.settings);
        self.write_then(
            move |db| {
                change(db, &chat)?;
                announce_in(db, Topic::ChatSettings, &chat)?;
                Ok((load_one(db, &chat)?, chat.clone()))
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
    use crate::store::testing;

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
        for db in testing::engines().await {
            cache_reflects_writes_and_survives_reopen_on(&db).await;
        }
    }

    async fn cache_reflects_writes_and_survives_reopen_on(db: &testing::TestDb) {
        let engine = db.engine();
        let store = db.open().await;
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            ChatSettings::default(),
            "{engine}"
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
        assert_eq!(c1.activation, Some(Activation::Always), "{engine}");
        assert_eq!(c1.paused, ["caid", "snark"], "{engine}");
        store.close().await.unwrap();
        drop(store);

        let store = db.open().await;
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            c1,
            "{engine}"
        );
        assert!(
            store
                .chat_settings(&slack("C2"))
                .await
                .unwrap()
                .is_paused(&"anyone".parse().unwrap()),
            "{engine}"
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
            },
            "{engine}"
        );
        store.set_paused(&slack("C1"), "*", false).await.unwrap();
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            ChatSettings::default(),
            "{engine}"
        );

        // What the cache says is what the database says.
        store.close().await.unwrap();
        let store = db.open().await;
        assert_eq!(
            store.chat_settings(&slack("C1")).await.unwrap(),
            ChatSettings::default(),
            "{engine}"
        );
        assert!(
            store
                .chat_settings(&slack("C2"))
                .await
                .unwrap()
                .is_paused(&"x".parse().unwrap()),
            "{engine}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_changes_leave_the_cache_equal_to_the_database() {
        for db in testing::engines().await {
            let store = db.open().await;
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
            let saved = store.read(|db| load_one(db, "slack:C1")).await.unwrap();
            assert_eq!(cached, saved, "{}", db.engine());
        }
    }

    /// A change made through one instance reaches another's cache without a restart. Waits on
    /// the condition with a deadline.
    /// Resuming one bot where every bot is paused leaves the others paused, those paused by
    /// name among them; where only it was paused, only its pause goes.
    #[tokio::test]
    async fn resuming_one_bot_of_every_bot_paused_keeps_the_others_paused() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let others = || vec!["caid".to_owned(), "snark".to_owned()];
            store.set_paused(&slack("C1"), "snark", true).await.unwrap();
            store.set_paused(&slack("C1"), "*", true).await.unwrap();
            store
                .resume_alone(&slack("C1"), "alpha", others())
                .await
                .unwrap();
            let paused = store.chat_settings(&slack("C1")).await.unwrap().paused;
            assert_eq!(paused, ["caid", "snark"], "{engine}");
            store
                .resume_alone(&slack("C1"), "caid", vec!["alpha".into()])
                .await
                .unwrap();
            let after = store.chat_settings(&slack("C1")).await.unwrap().paused;
            assert_eq!(
                after,
                ["snark"],
                "{engine}: no pause of every bot to hand on"
            );
            let reopened = db.open().await;
            let kept = reopened.chat_settings(&slack("C1")).await.unwrap().paused;
            assert_eq!(kept, ["snark"], "{engine}: on record");
        }
    }

    #[tokio::test]
    async fn a_change_through_another_instance_reaches_this_cache() {
        let db = testing::TestDb::postgres().await;
        let (here, there) = (db.open().await, db.open().await);
        let follower = tokio::spawn({
            let here = here.clone();
            async move { here.follow_chat_settings().await }
        });
        // The follower subscribes when it first runs: wait until a change made before it could
        // have subscribed is not the only one, by changing until the cache shows it.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let paused = ChatSettings {
            activation: Some(Activation::Always),
            paused: vec!["caid".into()],
        };
        loop {
            there
                .set_activation(&slack("C1"), Some(Activation::Always))
                .await
                .unwrap();
            there.set_paused(&slack("C1"), "caid", true).await.unwrap();
            if here.chat_settings(&slack("C1")).await.unwrap() == paused {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the other instance's change never reached this cache"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        there.set_paused(&slack("C1"), "*", false).await.unwrap();
        loop {
            let now = here.chat_settings(&slack("C1")).await.unwrap();
            if now.paused.is_empty() {
                assert_eq!(now.activation, Some(Activation::Always));
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "resume never arrived: {now:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        follower.abort();
    }
}
