//! Deliveries nobody is working on any more, picked up: at start, those the last process under
//! this instance's id left (and those of instances that are gone); while running, those of an
//! instance that just stopped renewing (killed, cut off), and those handed to this instance as
//! the target's home ([`serve`]); the same for session wakes (`wake.rs`). Each is claimed first (one conditional update on its runner),
//! so exactly one instance resumes it. Nothing is dropped without a record.
//!
//! A delivery still *queued* never started, so it is simply run now. One that was *running* may
//! have done part of its work (tool calls with effects), so it is not run again: if its turn got
//! as far as an outcome in the target's transcript, that outcome stands; otherwise it is failed
//! with a reason that says why it was not retried. A settled one whose outcome had not reached
//! its sender is pushed, unless the sender's transcript shows it was. A delivery whose sender
//! waited on an instance that is gone has its outcome pushed to the sender's session, unless
//! the sender's turn, run again, took the wait over first.

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Relay;
use super::RunResult;
use super::home::{Home, home_of};
use super::run::{self, push_run_id};
use super::send::start;
use super::wake;
use crate::engine::Engine;
use crate::store::{Delivery, DeliveryState, EntryKind, Notice, Notify, StoreError, Topic};

/// Pick up what nobody else will: at start (`startup`), also what this instance's id left.
/// Returns how many deliveries this instance claimed.
pub async fn recover(relay: &Relay, startup: bool) -> Result<usize, StoreError> {
    let engine = relay.engine();
    let me = engine.instance();
    let lease_ms = i64::try_from(engine.lease().as_millis()).unwrap_or(i64::MAX);
    let open = engine
        .store()
        .deliveries_unsettled(me, startup, lease_ms)
        .await?;
    let mut claimed = 0;
    for d in &open {
        // Handed to the target's live home: it takes it.
        if d.runner.is_none()
            && d.state == DeliveryState::Queued
            && home_of(engine, &d.target).await != Home::Here
        {
            continue;
        }
        if !engine
            .store()
            .delivery_claim(&d.run_id, d.runner.as_deref(), Some(me))
            .await?
        {
            continue;
        }
        claimed += 1;
        resume(relay, d, startup).await?;
    }
    // After the runs above: one settled there is settled by now, so pushed here.
    claimed += waits(engine, startup).await?;
    Ok(claimed + wakes(engine, startup).await?)
}

/// The deliveries whose sender waited on an instance that is gone (see [`recover`]): each is
/// taken from it (one conditional update, which the sender's turn run again races for, so the
/// outcome reaches the session once), then pushed if it is settled, or marked to be pushed by
/// the run when it settles. Returns how many it took.
async fn waits(engine: &Engine, startup: bool) -> Result<usize, StoreError> {
    let lease_ms = i64::try_from(engine.lease().as_millis()).unwrap_or(i64::MAX);
    let left = engine
        .store()
        .deliveries_waiter_gone(engine.instance(), startup, lease_ms)
        .await?;
    let mut taken = 0;
    for d in left {
        let Some(gone) = d.waiter.as_deref() else {
            continue;
        };
        let Some(d) = engine
            .store()
            .delivery_take_wait(&d.run_id, gone, None)
            .await?
        else {
            continue;
        };
        taken += 1;
        if d.state.is_settled() {
            tracing::info!(run = %d.run_id, sender = %d.sender, "pushing an outcome whose sender's instance is gone");
            push_unless_pushed(engine, &d).await?;
        }
    }
    Ok(taken)
}

/// The session wakes nobody is working on (see [`recover`]), run here when this instance is
/// the home of their session's bot or their runner is gone. Returns how many it took.
async fn wakes(engine: &Engine, startup: bool) -> Result<usize, StoreError> {
    let lease_ms = i64::try_from(engine.lease().as_millis()).unwrap_or(i64::MAX);
    let left = engine
        .store()
        .wakes_left(engine.instance(), startup, lease_ms)
        .await?;
    let mut taken = 0;
    for wake in left {
        if wake.runner.is_none() {
            let here = match wake.bot.parse() {
                Ok(bot) => home_of(engine, &bot).await == Home::Here,
                Err(_) => true,
            };
            if !here {
                continue;
            }
        }
        wake::take_up(engine, &wake.id, wake.runner.as_deref()).await;
        taken += 1;
    }
    Ok(taken)
}

/// Resume `d`, claimed by this instance.
async fn resume(relay: &Relay, d: &Delivery, startup: bool) -> Result<(), StoreError> {
    let engine = relay.engine();
    match d.state {
        DeliveryState::Queued => {
            tracing::info!(run = %d.run_id, target = %d.target, "resuming a queued delivery");
            if startup {
                // Its sender was this process's, which is gone: nobody waits any more.
                engine
                    .store()
                    .delivery_notify(&d.run_id, Notify::Pending)
                    .await?;
            }
            start(relay, d);
        }
        DeliveryState::Running => {
            let result = interrupted(engine, d).await?;
            tracing::warn!(run = %d.run_id, target = %d.target, ?result, "settling a delivery whose run was interrupted (a restart, or its instance is gone)");
            run::settle(engine, d, result, None).await;
        }
        _ => push_unless_pushed(engine, d).await?,
    }
    Ok(())
}

/// Push settled `d`'s outcome to its sender's session, unless the sender's transcript shows it
/// was.
async fn push_unless_pushed(engine: &Engine, d: &Delivery) -> Result<(), StoreError> {
    let pushed = engine
        .store()
        .run_entries(&d.sender_session, &push_run_id(&d.run_id))
        .await?;
    if pushed.is_empty() {
        run::push(engine, d, &settled(d)).await;
    } else {
        engine
            .store()
            .delivery_notify(&d.run_id, Notify::Done)
            .await?;
    }
    Ok(())
}

/// Until `stop`: run the deliveries handed to this instance as their target's home, and pick up
/// those of an instance that is gone (the number of `live` instances dropped) or whose notice
/// may have been missed.
pub async fn serve(relay: Relay, mut live: watch::Receiver<usize>, stop: CancellationToken) {
    let engine = relay.engine();
    let mut notices = engine.store().subscribe();
    let mut was = *live.borrow_and_update();
    loop {
        let sweep = tokio::select! {
            () = stop.cancelled() => return,
            notice = notices.next() => match notice {
                Notice::Changed { topic: Topic::Handed, key } => {
                    take_up(&relay, &key).await;
                    false
                }
                Notice::Changed { topic: Topic::Wake, .. } => {
                    if let Err(err) = wakes(engine, false).await {
                        tracing::error!(%err, "could not look for session wakes handed to this instance");
                    }
                    false
                }
                Notice::Changed { .. } => false,
                Notice::Missed => true,
            },
            changed = live.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = *live.borrow_and_update();
                std::mem::replace(&mut was, now) > now
            }
        };
        if sweep {
            match recover(&relay, false).await {
                Ok(0) => {}
                Ok(claimed) => {
                    tracing::info!(claimed, "picked up deliveries another instance left")
                }
                Err(err) => {
                    tracing::error!(%err, "could not look for deliveries left by another instance")
                }
            }
        }
    }
}

/// A delivery handed over: claimed and run here if this instance is its target's home.
async fn take_up(relay: &Relay, run_id: &str) {
    let engine = relay.engine();
    let d = match engine.store().delivery(run_id).await {
        Ok(Some(d)) if d.state == DeliveryState::Queued && d.runner.is_none() => d,
        Ok(_) => return,
        Err(err) => {
            tracing::error!(run = run_id, %err, "could not read a delivery handed to this instance");
            return;
        }
    };
    if home_of(engine, &d.target).await != Home::Here {
        return;
    }
    match engine
        .store()
        .delivery_claim(run_id, None, Some(engine.instance()))
        .await
    {
        Ok(true) => start(relay, &d),
        Ok(false) => {}
        Err(err) => {
            tracing::error!(run = run_id, %err, "could not claim a delivery handed to this instance")
        }
    }
}

/// What became of a run cut short, judged from the target's transcript.
async fn interrupted(engine: &Engine, d: &Delivery) -> Result<RunResult, StoreError> {
    let entries = engine
        .store()
        .run_entries(&d.target_session, &d.run_id)
        .await?;
    let model = |e: &crate::store::Entry| e.meta["model"].as_str().unwrap_or_default().to_owned();
    let outcome = entries.iter().rev().find_map(|e| match e.kind {
        EntryKind::Answer => Some(RunResult::Answered {
            reply: e.text.clone(),
            model: model(e),
        }),
        EntryKind::Silent => Some(RunResult::Answered {
            reply: String::new(),
            model: model(e),
        }),
        EntryKind::Failure => Some(RunResult::Failed {
            state: DeliveryState::Failed,
            reason: e.text.clone(),
        }),
        _ => None,
    });
    Ok(outcome.unwrap_or_else(|| RunResult::Failed {
        state: DeliveryState::Failed,
        reason: format!(
            "the gateway restarted (or the instance running it stopped) while bot '{}' was \
             working on this; it was not run again, so it cannot act twice. Send it again if it \
             is still needed.",
            d.target
        ),
    }))
}

/// The outcome a settled delivery records.
fn settled(d: &Delivery) -> RunResult {
    match d.state {
        DeliveryState::Delivered => RunResult::Answered {
            reply: d.reply.clone().unwrap_or_default(),
            model: d.model.clone().unwrap_or_default(),
        },
        state => RunResult::Failed {
            state,
            reason: d.reason.clone().unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::testing::{
        Parts, begun, echo_config, held_elsewhere, new_delivery, parts, room_texts, until_idle,
    };
    use crate::store::DeliveryChange;
    use crate::timing::now_ms;

    async fn two_bots() -> Parts {
        parts(&echo_config(&["alpha", "beta"], "")).await
    }

    /// The text the sender's echo posts for run `run_id`'s pushed reply `reply`.
    fn pushed(run_id: &str, reply: &str) -> String {
        format!("[reply to your sessions_send, run {run_id}] {reply}")
    }

    async fn row(engine: &Engine, run_id: &str) -> Delivery {
        engine.store().delivery(run_id).await.unwrap().unwrap()
    }

    async fn to_state(engine: &Engine, run_id: &str, state: DeliveryState) {
        let change = DeliveryChange {
            reply: Some(format!("{run_id} done")),
            model: Some("echo".into()),
            ..DeliveryChange::to(run_id, state, now_ms())
        };
        engine.store().delivery_settle(change).await.unwrap();
    }

    /// A run the last process under this id queued never started: it runs now, and its outcome
    /// is pushed, since the sender that waited was that process's.
    #[tokio::test]
    async fn a_queued_run_left_at_a_restart_runs_and_its_outcome_is_pushed() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let waited = crate::store::NewDelivery {
            mode: crate::store::SendMode::Wait,
            ..new_delivery("r1", "alpha", "beta", "ping")
        };
        begun(engine, waited, Some(engine.instance())).await;
        assert_eq!(recover(&gw.relay, true).await.unwrap(), 1);
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        assert_eq!(
            (d.state, d.reply.as_deref(), d.notify),
            (DeliveryState::Delivered, Some("ping"), Notify::Done)
        );
        assert_eq!(room_texts(&gw, "room").await, [pushed("r1", "ping")]);
    }

    /// A run cut short may have acted: it is not run again. An answer it got on record
    /// stands; without one it fails saying why.
    #[tokio::test]
    async fn an_interrupted_run_is_not_run_again() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let me = Some(engine.instance());
        let answered = begun(engine, new_delivery("r1", "alpha", "beta", "one"), me).await;
        begun(engine, new_delivery("r2", "alpha", "beta", "two"), me).await;
        for run in ["r1", "r2"] {
            let running = DeliveryChange::to(run, DeliveryState::Running, now_ms());
            engine.store().delivery_settle(running).await.unwrap();
        }
        let journal = crate::engine::journal(engine, &answered.target_session, "r1".into()).await;
        journal
            .bot_did(EntryKind::Answer, "half", json!({"model": "echo"}))
            .await;

        assert_eq!(recover(&gw.relay, true).await.unwrap(), 2);
        until_idle(engine).await;
        let r1 = row(engine, "r1").await;
        assert_eq!(
            (r1.state, r1.reply.as_deref(), r1.model.as_deref()),
            (DeliveryState::Delivered, Some("half"), Some("echo"))
        );
        let r2 = row(engine, "r2").await;
        assert_eq!(r2.state, DeliveryState::Failed);
        let reason = r2.reason.unwrap_or_default();
        assert!(reason.contains("it was not run again"), "{reason}");
        let r2_turns = engine
            .store()
            .run_entries(&r2.target_session, "r2")
            .await
            .unwrap();
        assert!(r2_turns.is_empty(), "{r2_turns:?}");
    }

    /// A settled outcome that had not reached its sender is pushed, unless the sender's
    /// transcript shows the push happened (then it is only marked done).
    #[tokio::test]
    async fn a_settled_outcome_is_pushed_once() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let me = Some(engine.instance());
        begun(engine, new_delivery("r1", "alpha", "beta", "one"), me).await;
        let r2 = begun(engine, new_delivery("r2", "alpha", "beta", "two"), me).await;
        to_state(engine, "r1", DeliveryState::Delivered).await;
        to_state(engine, "r2", DeliveryState::Delivered).await;
        let journal = crate::engine::journal(engine, &r2.sender_session, push_run_id("r2")).await;
        journal
            .heard(
                "bot:beta",
                crate::store::Origin::Bot,
                "r2 done",
                None,
                json!({}),
            )
            .await;

        assert_eq!(recover(&gw.relay, true).await.unwrap(), 2);
        until_idle(engine).await;
        assert_eq!(room_texts(&gw, "room").await, [pushed("r1", "r1 done")]);
        for run in ["r1", "r2"] {
            assert_eq!(row(engine, run).await.notify, Notify::Done, "{run}");
        }
    }

    /// A sender that waited on an instance that is gone gets the outcome pushed, unless its
    /// turn, run again, took the wait over first.
    #[tokio::test]
    async fn an_outcome_whose_waiter_is_gone_is_pushed_unless_taken_over() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        for run in ["r1", "r2"] {
            let waited = crate::store::NewDelivery {
                mode: crate::store::SendMode::Wait,
                waiter: Some("gone".into()),
                ..new_delivery(run, "alpha", "beta", run)
            };
            begun(engine, waited, Some("gone")).await;
            to_state(engine, run, DeliveryState::Delivered).await;
        }
        let store = engine.store();
        let me = Some(engine.instance());
        let taken = store.delivery_take_wait("r2", "gone", me).await.unwrap();
        assert!(taken.is_some());

        assert_eq!(recover(&gw.relay, false).await.unwrap(), 1);
        until_idle(engine).await;
        assert_eq!(room_texts(&gw, "room").await, [pushed("r1", "r1 done")]);
        assert_eq!(row(engine, "r1").await.notify, Notify::Done);
        assert_eq!(row(engine, "r2").await.notify, Notify::None);
    }

    /// A queued run nobody claimed, whose target's socket another live instance holds, is
    /// that home's to take; once nobody holds it, it runs here.
    #[tokio::test]
    async fn a_queued_run_is_left_to_the_targets_live_home() {
        let db = crate::store::testing::TestDb::postgres().await;
        let gw = held_elsewhere(&["beta", "alpha"], &db).await;
        let engine = &gw.engine;
        begun(engine, new_delivery("r1", "alpha", "beta", "ping"), None).await;
        assert_eq!(recover(&gw.relay, false).await.unwrap(), 0);
        let d = row(engine, "r1").await;
        assert_eq!((d.state, d.runner), (DeliveryState::Queued, None));

        engine.store().lease_release("other").await.unwrap();
        assert_eq!(recover(&gw.relay, false).await.unwrap(), 1);
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        assert_eq!(
            (d.state, d.runner.as_deref()),
            (DeliveryState::Delivered, Some(engine.instance()))
        );
    }
}
