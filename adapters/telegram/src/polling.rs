//! Long polling (`getUpdates`), the default transport, and the identity every mode learns.
//!
//! The offset is kept durably by Telegram itself: an update counts as confirmed only once
//! `getUpdates` is called with a higher offset, and baton asks for the next offset only after
//! the gateway has durably taken every update of the batch. A crash, a kill -9 or a restart
//! therefore gets the unconfirmed updates again, and the gateway's dedupe (by chat and message
//! id) drops the ones it already had: nothing is lost, nothing is answered twice.

use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AdapterError, Backoff, ConnectionState, EventSink, Link, LinkError, NotTaken, SessionEnd,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::ApiError;
use crate::{Mode, TelegramAdapter, outbound};

/// The connection of one account: identity, then polls (or nothing, in webhook mode).
pub(crate) struct Polling<'a>(pub(crate) &'a TelegramAdapter);

#[async_trait]
impl Link for Polling<'_> {
    async fn identify(&mut self) -> Result<(), LinkError> {
        let adapter = self.0;
        let settings = &adapter.settings;
        let me = adapter
            .api
            .get_me()
            .await
            .map_err(|err| fatal_or_transient(adapter, err))?;
        tracing::info!(account = %settings.account, id = me.id, username = %me.username, "Telegram bot identified");
        if !me.can_read_all_group_messages {
            tracing::warn!(account = %settings.account, username = %me.username, "Group Privacy is on: in groups this bot only sees commands, mentions and replies to it; turn it off with @BotFather /setprivacy");
        }
        settings.directory.add(&me.username, me.id);
        match settings.mode {
            Mode::Polling => {
                // getUpdates answers 409 while a webhook is set.
                adapter
                    .api
                    .call("deleteWebhook", &json!({}))
                    .await
                    .map_err(|err| fatal_or_transient(adapter, err))?;
            }
            Mode::Webhook => adapter.register_webhook().await?,
        }
        if let Err(err) = outbound::register_commands(&adapter.api).await {
            tracing::warn!(account = %settings.account, %err, "could not register /baton with setMyCommands");
        }
        *adapter.identity.write().expect("identity lock poisoned") = Some(me);
        Ok(())
    }

    async fn session(
        &mut self,
        sink: &dyn EventSink,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<SessionEnd, LinkError> {
        let adapter = self.0;
        // getMe has answered: the token works, and updates are there to be asked for.
        adapter.connection.set(ConnectionState::Connected);
        loop {
            let offset = *adapter.offset.lock().expect("offset lock poisoned");
            let mut body = json!({
                "timeout": adapter.settings.poll_timeout.as_secs(),
                "allowed_updates": ["message"],
            });
            if let Some(offset) = offset {
                body["offset"] = json!(offset);
            }
            let wait = adapter.settings.poll_timeout + Duration::from_secs(10);
            let polled = tokio::select! {
                () = shutdown.cancelled() => return Ok(SessionEnd::Shutdown),
                polled = adapter.api.call_with("getUpdates", &body, wait) => polled,
            };
            let updates = match polled {
                Ok(Value::Array(updates)) => updates,
                Ok(_) => Vec::new(),
                Err(ApiError::Refused {
                    code: 409,
                    description,
                    ..
                }) => {
                    return Err(LinkError::Transient(format!(
                        "Telegram answered 409 ({description}): another process polls with this \
                         bot's token, or a webhook is set; run one baton per token"
                    )));
                }
                Err(err) => return Err(fatal_or_transient(adapter, err)),
            };
            backoff.reset();
            for update in updates {
                let Some(id) = update.get("update_id").and_then(Value::as_i64) else {
                    continue;
                };
                match adapter.take(&update, sink).await {
                    Ok(()) => {}
                    Err(NotTaken::ShuttingDown) => return Ok(SessionEnd::Shutdown),
                    Err(NotTaken::StoreFailing) => {
                        return Err(LinkError::Transient(
                            "the gateway cannot record events; the update is asked for again"
                                .into(),
                        ));
                    }
                }
                *adapter.offset.lock().expect("offset lock poisoned") = Some(id + 1);
            }
        }
    }
}

/// A 401 stops the account; anything else is worth trying again.
fn fatal_or_transient(adapter: &TelegramAdapter, err: ApiError) -> LinkError {
    match err {
        ApiError::Unauthorized => LinkError::Fatal(AdapterError::Auth(format!(
            "Telegram refused the bot token of account `{}`; check the variable named by its \
             bot_token_env (a new token comes from @BotFather /token)",
            adapter.settings.account
        ))),
        other => LinkError::Transient(other.to_string()),
    }
}
