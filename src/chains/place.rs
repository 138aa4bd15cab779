//! Where a chain lives: the chat it was started from, and each bot's session and account there.
//!
//! Every post goes to the same place: the chat's thread when the chain started in one, else as a
//! reply to the chain's anchor message (the command that started it, or baton's announcement).
//! On Slack a reply to a top-level message *is* a post in the thread under it, so the whole chain
//! reads as one thread; on platforms without threads the posts are replies to one message.

use baton_contract::{AccountId, ChatId, MessageId, Platform, ThreadId};

use crate::bot_id::BotId;
use crate::engine::Engine;
use crate::post::Target;
use crate::roster::Account;
use crate::session::SessionKey;
use crate::store::{Chain, ChainOrigin};
use baton_contract::ChatKey;

/// The chat a chain posts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// The platform.
    pub platform: Platform,
    /// The chat.
    pub chat: ChatId,
    /// The thread it started in, if any.
    pub thread: Option<ThreadId>,
    /// The message its posts answer.
    pub anchor: Option<MessageId>,
    /// The account baton's own lines about the chain go through.
    pub account: AccountId,
}

impl Place {
    /// The place a stored chain posts in.
    pub(crate) fn of(chain: &Chain) -> Place {
        let o = &chain.origin;
        Place {
            platform: o.platform,
            chat: ChatId::from(o.chat.as_str()),
            thread: o.thread.as_deref().map(ThreadId::from),
            anchor: o.anchor.as_deref().map(MessageId::from),
            account: AccountId::from(o.account.as_str()),
        }
    }

    /// As stored.
    pub(crate) fn origin(&self) -> ChainOrigin {
        ChainOrigin {
            platform: self.platform,
            chat: self.chat.to_string(),
            thread: self.thread.as_ref().map(ToString::to_string),
            anchor: self.anchor.as_ref().map(ToString::to_string),
            account: self.account.to_string(),
        }
    }

    /// `<platform>:<chat>[:thread:<id>]`, for remembering the chain's lines as not-to-wake.
    pub(crate) fn chat_key(&self) -> ChatKey {
        ChatKey::new(self.platform, &self.chat, self.thread.as_ref())
    }

    /// Where every post of the chain goes.
    pub(crate) fn target(&self) -> Target {
        Target {
            chat: self.chat.clone(),
            thread: self.thread.clone(),
            reply_to: self.anchor.clone(),
            ephemeral: None,
        }
    }

    /// `bot`'s account on this platform: a bot speaks in the chain only under its own identity.
    pub(crate) fn account_of<'a>(&self, engine: &'a Engine, bot: &BotId) -> Option<&'a Account> {
        engine.roster().account_of_bot(self.platform, bot)
    }

    /// The account baton's own lines go through.
    pub(crate) fn voice<'a>(&self, engine: &'a Engine) -> Option<&'a Account> {
        engine.roster().account(self.platform, &self.account)
    }

    /// `account`'s session in this chat (and thread): where its chain turns and posts are
    /// recorded.
    pub(crate) fn session(&self, account: &Account) -> SessionKey {
        SessionKey {
            bot: account.bot.id().clone(),
            platform: self.platform,
            account: account.id.clone(),
            chat: self.chat.clone(),
            thread: self.thread.clone(),
        }
    }

    /// The bot named `name`, if it can take part here: it must exist and have an account on
    /// this platform. Otherwise why not, saying what to do.
    pub(crate) fn speaker(&self, engine: &Engine, name: &str) -> Result<BotId, String> {
        let Some(bot) = engine.roster().bots().iter().find(|b| b.id() == name) else {
            let known: Vec<&str> = engine
                .roster()
                .bots()
                .iter()
                .map(|b| b.id().as_str())
                .collect();
            return Err(format!("no bot `{name}`; known bots: {}", known.join(", ")));
        };
        if self.account_of(engine, bot.id()).is_none() {
            return Err(format!(
                "bot `{name}` has no account on {}, so it cannot speak in this chat; add an \
                 [[accounts]] entry for it on {} or pick another bot",
                self.platform, self.platform
            ));
        }
        Ok(bot.id().clone())
    }
}

#[cfg(test)]
mod tests {
    use baton_contract::{AccountId, ChatId, Platform, ThreadId};

    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    fn place(platform: Platform) -> Place {
        Place {
            platform,
            chat: ChatId::from("room"),
            thread: Some(ThreadId::from("t1")),
            anchor: None,
            account: AccountId::from("alpha"),
        }
    }

    /// Only a bot with an account on the chain's platform speaks in it; a name that is no bot
    /// is told which bots there are.
    #[tokio::test]
    async fn only_a_bot_with_an_account_here_may_speak() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let local = place(Platform::Local);
        assert_eq!(local.speaker(&gw.engine, "beta").unwrap().as_str(), "beta");
        let unknown = local.speaker(&gw.engine, "gamma").unwrap_err();
        assert!(unknown.contains("known bots: alpha, beta"), "{unknown}");
        let elsewhere = place(Platform::Slack);
        let refused = elsewhere.speaker(&gw.engine, "alpha").unwrap_err();
        assert!(refused.contains("has no account on slack"), "{refused}");
    }

    /// A bot's chain turns and posts are recorded in its own session of the chain's chat and
    /// thread, under its own account.
    #[tokio::test]
    async fn each_bot_speaks_from_its_own_session_of_the_chat() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let here = place(Platform::Local);
        let beta = here
            .account_of(&gw.engine, &"beta".parse().unwrap())
            .unwrap();
        let session = here.session(beta);
        assert_eq!(session.bot.as_str(), "beta");
        assert_eq!(session.account, beta.id);
        assert_eq!(session.thread.as_ref().map(|t| t.as_str()), Some("t1"));
        let voice = here.voice(&gw.engine).unwrap();
        assert_eq!(
            voice.bot.id().as_str(),
            "alpha",
            "baton speaks through the place's account"
        );
    }
}
