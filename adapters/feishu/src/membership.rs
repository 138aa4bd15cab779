//! Whether the bot is in a chat, asked before the gateway hands it another baton bot's post
//! there (Feishu does not deliver bot posts to bots, so baton does; a bot must not hear a chat
//! it is not in, nor a sibling's direct conversation).
//!
//! `GET /open-apis/im/v1/chats/<chat>/members/is_in_chat` with the app's tenant token answers
//! for the bot itself. The answer is kept for [`FRESH_FOR`], so a busy chat costs one call per
//! interval, and at most [`REMEMBERED`] chats are kept (the table starts over when full).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use baton_contract::SendError;

use crate::api::Api;
use crate::outbound::send_error;

/// How long an answer is trusted: a bot added to a chat hears its siblings within this.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(600);
/// How many chats' answers are kept.
const REMEMBERED: usize = 4096;

/// The bot's recent answers, by chat id.
#[derive(Default)]
pub(crate) struct Membership {
    known: Mutex<HashMap<String, (bool, Instant)>>,
}

impl Membership {
    /// Whether the bot is in `chat`: the recent answer, or Feishu's.
    pub(crate) async fn in_chat(&self, api: &Api, chat: &str) -> Result<bool, SendError> {
        if let Some(&(member, at)) = self.known.lock().expect("membership lock").get(chat)
            && at.elapsed() < FRESH_FOR
        {
            return Ok(member);
        }
        let member = api.is_in_chat(chat).await.map_err(send_error)?;
        let mut known = self.known.lock().expect("membership lock");
        if known.len() >= REMEMBERED {
            known.clear();
        }
        known.insert(chat.to_owned(), (member, Instant::now()));
        Ok(member)
    }
}
