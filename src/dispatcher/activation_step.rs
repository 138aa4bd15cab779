//! Pipeline step 6: the chat's activation (its `/baton activation` over the configured one)
//! decides whether the message wakes the bot (`activation.rs`, pure); a paused bot is not woken.
//! Either way the message is kept as history.

use super::activation::{self, Wake};
use super::stop::{Step, Stop};
use super::{Dispatcher, DropReason, Handled, Inbound};

impl Dispatcher {
    /// Step 6: whether the message wakes the bot (the chat's `/baton activation` over its
    /// configured one), and whether the bot is paused here. A message that does not wake it is
    /// kept as history.
    pub(super) async fn activation(&self, inbound: &Inbound<'_>) -> Step<Wake> {
        let engine = &self.engine;
        let settings = engine
            .store()
            .chat_settings(&inbound.settings_key)
            .await
            .unwrap_or_default();
        let activation = settings.activation.unwrap_or(inbound.policy.activation);
        let roster = engine.roster();
        let me = inbound.account.adapter.self_id();
        let woke = activation::decide(
            &inbound.event,
            me.as_ref(),
            activation,
            &inbound.policy,
            |u| roster.bot_of_user(inbound.event.platform, u).is_some(),
        );
        let Some(wake) = woke else {
            return Err(Stop::handled(Handled::Buffered).keep_as_history());
        };
        if settings.is_paused(inbound.bot()) {
            return Err(Stop::dropped(DropReason::Paused).keep_as_history());
        }
        Ok(wake)
    }
}
