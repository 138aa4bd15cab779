//! The typing indicator of one turn, with exactly one owner that always takes it away.
//!
//! [`Typing::start`] shows the indicator from a task of its own (renewed where the platform's
//! lasts only seconds) and [`Typing::end`] takes it away and waits until it is gone. Whatever
//! ends the turn ends it: the turn's flow calls `end` after its reply, silence or failure; a
//! turn cut off some other way (its time limit, a shutdown that stops waiting, a panic) drops
//! the owner, and the drop tells the task to take the indicator away on its own. The task is
//! on the gateway's task tracker, so a shutdown waits for it.
//!
//! Where the indicator can carry text (Slack's thread status), it says the bot's latest
//! `progress` line while the turn runs: the task follows the event stream for the turn's run's
//! progress events. Elsewhere (Discord's and Telegram's chat actions, Feishu's reaction) the
//! indicator stays as it is.
//!
//! A kill -9 ends no indicator, and a Feishu/Lark reaction stays on its message until it is
//! removed (Discord's typing fades after 10 s, Slack clears the thread status when the bot
//! posts or after a while). So every indicator is on record in the store from before it is put
//! up until it is taken away, and the next start takes away whatever is still on record
//! ([`left_up`], [`take_down`]).
//!
//! With several instances on one database, each row names the instance that put it up, and
//! only rows nobody alive owns are taken down: at a start, the starting instance's own (its
//! previous run's) and those of instances that stopped renewing; and once a minute
//! ([`sweep`]), a dead instance's, by whichever live instance claims them first.

use std::sync::Arc;

use baton_contract::{Adapter, Platform, Typing as Shown, TypingTarget};
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::events::{Event, Events};
use crate::store::{OpenTyping, Store, StoreError};
use crate::timing::now_ms;

/// The owner of one turn's typing indicator.
pub(crate) struct Typing {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Typing {
    /// Show that the bot is working on an answer to `at` in run `run`, until [`Typing::end`]
    /// (or a drop).
    pub(crate) fn start(
        engine: &Engine,
        adapter: Arc<dyn Adapter>,
        at: TypingTarget,
        run: &str,
    ) -> Self {
        let stop = CancellationToken::new();
        let store = engine.store().clone();
        let owner = instance(engine);
        // Subscribed now, before the turn runs, so no progress line of it is missed.
        let progress = adapter
            .typing_shows_text()
            .then(|| Progress::follow(engine.events(), run));
        let task = engine
            .tasks()
            .spawn(show(store, owner, adapter, at, progress, stop.clone()));
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

/// Show, renew and take away the indicator, on record from before it is put up until it is gone.
/// Starting is never cut short: an indicator that was being put up when the turn ended is taken
/// away after it is up.
async fn show(
    store: Store,
    owner: String,
    adapter: Arc<dyn Adapter>,
    at: TypingTarget,
    mut progress: Option<Progress>,
    stop: CancellationToken,
) {
    let record = OpenTyping {
        id: 0,
        platform: adapter.platform().to_string(),
        account: adapter.account().to_string(),
        chat: at.chat.to_string(),
        thread: at.thread.as_ref().map(ToString::to_string),
        message: at.message.to_string(),
        handle: None,
        owner,
    };
    let row = match store.typing_opened(record, now_ms()).await {
        Ok(row) => row,
        Err(err) => {
            // Not put up: one that could not be taken away after a crash would stay.
            tracing::warn!(%err, "could not record the typing indicator; none is shown");
            return;
        }
    };
    let typing = match adapter.typing_start(&at).await {
        Ok(Some(typing)) => typing,
        Ok(None) => return closed(&store, row).await,
        Err(err) => {
            tracing::warn!(platform = %adapter.platform(), %err, "could not show the typing indicator");
            return closed(&store, row).await;
        }
    };
    if typing.handle.is_some()
        && let Err(err) = store.typing_up(row, typing.handle.clone()).await
    {
        tracing::warn!(%err, "could not record the typing indicator's handle");
    }
    let mut renew_at = typing
        .renew_every
        .map(|every| tokio::time::Instant::now() + every);
    loop {
        let renew = async {
            match renew_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let said = async {
            match progress.as_mut() {
                Some(progress) => progress.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = renew => {
                renew_at = typing.renew_every.map(|every| tokio::time::Instant::now() + every);
                if let Err(err) = adapter.typing_start(&at).await {
                    tracing::debug!(%err, "could not renew the typing indicator");
                }
            }
            line = said => match line {
                Some(line) => {
                    if let Err(err) = adapter.typing_says(&at, &typing, &line).await {
                        tracing::debug!(%err, "could not show a progress line on the typing indicator");
                    }
                }
                // The bus is gone (a shutdown): the indicator stays as it is until the end.
                None => progress = None,
            },
        }
    }
    match adapter.typing_stop(&at, &typing).await {
        Ok(()) => closed(&store, row).await,
        // Left on record: the next start tries again.
        Err(err) => {
            tracing::warn!(platform = %adapter.platform(), %err, "could not take the typing indicator away")
        }
    }
}

/// The progress lines of one run, as the event stream announces them.
struct Progress {
    live: tokio::sync::broadcast::Receiver<Arc<crate::events::Stamped>>,
    run: String,
}

impl Progress {
    fn follow(events: &Events, run: &str) -> Self {
        Self {
            live: events.subscribe(None).live,
            run: run.to_owned(),
        }
    }

    /// The run's next progress line, as the indicator says it (`2/5 · message`); `None` once
    /// the bus is closed. Lines missed while this reader lagged are skipped: only the latest
    /// matters.
    async fn next(&mut self) -> Option<String> {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let stamped = match self.live.recv().await {
                Ok(stamped) => stamped,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            };
            if let Event::Progress {
                run_id,
                message,
                step,
                of,
                ..
            } = &stamped.event
                && *run_id == self.run
            {
                return Some(match (step, of) {
                    (Some(step), Some(of)) => format!("{step}/{of} · {message}"),
                    (Some(step), None) => format!("{step} · {message}"),
                    _ => message.clone(),
                });
            }
        }
    }
}

/// The indicator of `row` is gone.
async fn closed(store: &Store, row: i64) {
    if let Err(err) = store.typing_closed(row).await {
        tracing::warn!(%err, "could not record that a typing indicator is gone");
    }
}

/// This instance's id, the owner of the indicators it puts up.
fn instance(engine: &Engine) -> String {
    engine
        .config()
        .cluster
        .instance_id
        .clone()
        .unwrap_or_else(crate::cluster::default_instance_id)
}

/// The typing indicators an earlier run left up (it was killed mid-turn), this instance's own
/// and those of instances that are gone; they are this instance's now. Taken at start, before
/// any turn can put one up.
pub(crate) async fn left_up(engine: &Engine) -> Result<Vec<OpenTyping>, StoreError> {
    take_over(engine, true).await
}

/// Take away the indicators of instances that died since (once a minute, from the gateway's
/// maintenance): a live instance's are left alone, its own included.
pub(crate) async fn sweep(engine: Engine) {
    match take_over(&engine, false).await {
        Ok(left) if left.is_empty() => {}
        Ok(left) => take_down(engine, left).await,
        Err(err) => {
            tracing::warn!(%err, "could not look for typing indicators left by a stopped instance")
        }
    }
}

async fn take_over(engine: &Engine, start: bool) -> Result<Vec<OpenTyping>, StoreError> {
    let lease = engine.config().cluster.lease_seconds.saturating_mul(1000);
    let lease_ms = i64::try_from(lease).unwrap_or(i64::MAX);
    engine
        .store()
        .typing_take_over(&instance(engine), lease_ms, start)
        .await
}

/// Take away the indicators `left` up by an earlier run. One that cannot be taken away now
/// (the platform is unreachable) stays on record for the next start; one whose account is gone
/// from the config is forgotten.
pub(crate) async fn take_down(engine: Engine, left: Vec<OpenTyping>) {
    for row in left {
        let account = row.platform.parse::<Platform>().ok().and_then(|platform| {
            engine
                .roster()
                .account(platform, &row.account.as_str().into())
        });
        let Some(account) = account else {
            tracing::warn!(
                platform = row.platform,
                account = row.account,
                "a typing indicator left up by a stopped run belongs to an account no longer configured; forgotten"
            );
            closed(engine.store(), row.id).await;
            continue;
        };
        let at = TypingTarget {
            chat: row.chat.as_str().into(),
            thread: row.thread.as_deref().map(Into::into),
            message: row.message.as_str().into(),
        };
        let typing = Shown {
            renew_every: None,
            handle: row.handle.clone(),
        };
        match account.adapter.typing_stop(&at, &typing).await {
            Ok(()) => {
                tracing::info!(
                    platform = row.platform,
                    account = row.account,
                    message = row.message,
                    "took away a typing indicator a stopped run left up"
                );
                closed(engine.store(), row.id).await;
            }
            Err(err) => {
                tracing::warn!(platform = row.platform, %err, "could not take away a typing indicator a stopped run left up; trying again at the next start")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use baton_contract::{Call, StubAdapter};

    use super::*;
    use crate::engine::testing::until;
    use crate::gateway::testing::{echo_config, parts};

    fn at() -> TypingTarget {
        TypingTarget {
            chat: "room".into(),
            thread: None,
            message: "m1".into(),
        }
    }

    /// How many times `stub` was asked to show, to say a line on, and to take away its
    /// indicator.
    fn asked(stub: &StubAdapter) -> (usize, Vec<String>, usize) {
        let calls = stub.calls();
        let starts = calls
            .iter()
            .filter(|c| matches!(c, Call::TypingStart(_)))
            .count();
        let says = calls
            .iter()
            .filter_map(|c| match c {
                Call::TypingSays(line) => Some(line.clone()),
                _ => None,
            })
            .collect();
        let stops = calls
            .iter()
            .filter(|c| matches!(c, Call::TypingStop(_)))
            .count();
        (starts, says, stops)
    }

    /// Each indicator is on record from before it is put up until it is gone, so one a
    /// killed run left up is found at the next start.
    #[tokio::test]
    async fn the_indicator_is_on_record_while_up_and_gone_once_ended() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").typing(None));
        let typing = Typing::start(&gw.engine, stub.clone(), at(), "r1");
        until("the indicator is up", || asked(&stub).0 == 1).await;
        let up = left_up(&gw.engine).await.unwrap();
        let on_record: Vec<_> = up.iter().map(|row| row.message.as_str()).collect();
        assert_eq!(on_record, ["m1"]);
        assert_eq!(asked(&stub).2, 0, "nothing took it away yet");
        typing.end().await;
        assert_eq!(stub.calls().last(), Some(&Call::TypingStop(at())));
        assert_eq!(asked(&stub), (1, Vec::new(), 1));
        assert!(left_up(&gw.engine).await.unwrap().is_empty());
    }

    /// A turn cut off by its time limit or a panic never calls `end`.
    #[tokio::test]
    async fn a_dropped_owner_still_takes_the_indicator_away() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").typing(None));
        let typing = Typing::start(&gw.engine, stub.clone(), at(), "r1");
        until("the indicator is up", || asked(&stub).0 == 1).await;
        drop(typing);
        until("the indicator is taken away", || asked(&stub).2 == 1).await;
    }

    #[tokio::test]
    async fn an_indicator_that_fades_is_shown_again_every_period_until_ended() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let every = Duration::from_millis(50);
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").typing(Some(every)));
        let typing = Typing::start(&gw.engine, stub.clone(), at(), "r1");
        until("shown three times", || asked(&stub).0 == 3).await;
        typing.end().await;
        let shown = asked(&stub).0;
        // Time passing is the subject: four periods without a renewal.
        tokio::time::sleep(every * 4).await;
        assert_eq!(
            asked(&stub),
            (shown, Vec::new(), 1),
            "not shown again once ended"
        );
    }

    /// The indicator says the latest `progress` line of its own run, as `step/of · message`.
    #[tokio::test]
    async fn an_indicator_that_carries_text_says_its_runs_progress() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(
            StubAdapter::new(Platform::Local, "b")
                .typing(None)
                .typing_text(),
        );
        let typing = Typing::start(&gw.engine, stub.clone(), at(), "r1");
        until("the indicator is up", || asked(&stub).0 == 1).await;
        let progress = |run: &str, message: &str, step, of| Event::Progress {
            run_id: run.into(),
            bot: "b".parse().unwrap(),
            session: "local:b:room".into(),
            message: message.into(),
            step,
            of,
        };
        let events = gw.engine.events();
        events.emit(progress("r2", "another run's work", None, None));
        events.emit(progress("r1", "reading the logs", Some(2), Some(5)));
        events.emit(progress("r1", "writing", None, None));
        until("two lines said", || asked(&stub).1.len() == 2).await;
        typing.end().await;
        assert_eq!(asked(&stub).1, ["2/5 · reading the logs", "writing"]);
    }

    /// A kill -9 ends no indicator: the next start takes away what is still on record, and
    /// forgets one whose account is no longer configured.
    #[tokio::test]
    async fn indicators_a_killed_run_left_up_are_taken_down_at_the_next_start() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let store = gw.engine.store();
        for account in ["b", "gone"] {
            let row = OpenTyping {
                id: 0,
                platform: "local".into(),
                account: account.into(),
                chat: "room".into(),
                thread: None,
                message: "m1".into(),
                handle: None,
                owner: instance(&gw.engine),
            };
            store.typing_opened(row, now_ms()).await.unwrap();
        }
        let left = left_up(&gw.engine).await.unwrap();
        assert_eq!(left.len(), 2);
        take_down(gw.engine.clone(), left).await;
        assert!(left_up(&gw.engine).await.unwrap().is_empty());
    }
}
