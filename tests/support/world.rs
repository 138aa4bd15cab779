//! One world for the tests of bots at work on the scripted fake model: a [`TestGateway`] on a
//! store file of its own, built the same way by every test that needs "a gateway with these bots
//! and the fake model" (bot_to_bot, handoff, artifacts) instead of each writing it out.
//!
//! A [`World`] is the running gateway (it derefs to it) plus the store file it owns.

use std::ops::Deref;

use super::fake_openai::FakeOpenAi;
use super::gateway::{TestGateway, temp_db};

/// A running gateway and the store file it owns (removed when the world is dropped).
pub struct World {
    gw: TestGateway,
    _dir: tempfile::TempDir,
}

impl World {
    /// A gateway from `config`, on a fresh store file.
    pub async fn start(config: &str) -> World {
        let (dir, db) = temp_db();
        let gw = TestGateway::start(config, &db).await;
        World { gw, _dir: dir }
    }

    /// Bots `ids` answering from `fake`, bot-to-bot open: see [`agents_config`].
    pub async fn agents(fake: &FakeOpenAi, ids: &[&str], extra: &str) -> World {
        World::start(&agents_config(fake, ids, extra)).await
    }

    /// Stop the gateway (drain, close the store). A test that restarts on the same file keeps
    /// its own with [`temp_db`] and [`TestGateway::start`].
    pub async fn stop(self) {
        self.gw.stop().await;
    }
}

impl Deref for World {
    type Target = TestGateway;

    fn deref(&self) -> &TestGateway {
        &self.gw
    }
}

/// Bots `ids` on the fake model (model = id), every agent tool allowed, open rooms, and `extra`
/// TOML (`[limits]`, `[agent_to_agent]`) appended. A drain of one second: these tests stop
/// gateways with sends still running, and would otherwise wait out a longer drain each time.
pub fn agents_config(fake: &FakeOpenAi, ids: &[&str], extra: &str) -> String {
    let mut text = String::from(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n",
    );
    for id in ids {
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{id}\"\nname = \"{id}\"\nbackend = \"openai\"\nmodel = \"{id}\"\n\
             base_url = \"{}\"\ntools = [\"*\"]\n",
            fake.base_url
        ));
    }
    text.push_str(extra);
    text
}
