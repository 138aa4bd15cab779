//! The typing indicator of one turn, with exactly one owner that always takes it away.
//!
//! [`Typing::start`] shows the indicator from a task of its own (renewed where the platform's
//! lasts only seconds) and [`Typing::end`] takes it away and waits until it is gone. Whatever
//! ends the turn ends it: the turn's flow calls `end` after its reply, silence or failure; a
//! turn cut off some other way (its time limit, a shutdown that stops waiting, a panic) drops
//! the owner, and the drop tells the task to take the indicator away on its own. The task is
//! on the gateway's task tracker, so a shutdown waits for it.

use std::sync::Arc;

use baton_contract::{Adapter, TypingTarget};
use tokio_util::sync::CancellationToken;

use super::Services;

/// The owner of one turn's typing indicator.
pub(crate) struct Typing {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Typing {
    /// Show that the bot is working on an answer to `at`, until [`Typing::end`] (or a drop).
    pub(crate) fn start(services: &Services, adapter: Arc<dyn Adapter>, at: TypingTarget) -> Self {
        let stop = CancellationToken::new();
        let task = services.tasks().spawn(show(adapter, at, stop.clone()));
        Self {
            stop,
            task: Some(task),
        }
    }

    /// Take the indicator away, and return once it is gone (or could not be removed: logged).
    pub(crate) async fn end(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Typing {
    fn drop(&mut self) {
        // Not ended by its flow: the task still takes the indicator away.
        self.stop.cancel();
    }
}

/// Show, renew and take away the indicator. Starting is never cut short: an indicator that
/// was being put up when the turn ended is taken away after it is up.
async fn show(adapter: Arc<dyn Adapter>, at: TypingTarget, stop: CancellationToken) {
    let typing = match adapter.typing_start(&at).await {
        Ok(Some(typing)) => typing,
        Ok(None) => return,
        Err(err) => {
            tracing::warn!(platform = %adapter.platform(), %err, "could not show the typing indicator");
            return;
        }
    };
    if let Some(every) = typing.renew_every {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(every) => {
                    if let Err(err) = adapter.typing_start(&at).await {
                        tracing::debug!(%err, "could not renew the typing indicator");
                    }
                }
            }
        }
    } else {
        stop.cancelled().await;
    }
    if let Err(err) = adapter.typing_stop(&at, &typing).await {
        tracing::warn!(platform = %adapter.platform(), %err, "could not take the typing indicator away");
    }
}
