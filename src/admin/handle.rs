//! The admin commands' handle: the chains (a chain started by a command is set going once the
//! answer is posted, and its engine runs every other command) and the read-only views the
//! reports show that no engine holds: the schedule's board (`/baton status`). Cheap to clone;
//! the gateway builds it once, and the dispatcher holds it.

use std::sync::Arc;

use crate::chains::Chains;
use crate::engine::Engine;
use crate::timing::Board;

/// The admin commands over the engine.
#[derive(Clone)]
pub(crate) struct Admin {
    chains: Chains,
    schedule: Arc<Board>,
}

impl Admin {
    /// Commands over `chains` (and its engine), showing the scheduler's `schedule`.
    pub(crate) fn new(chains: Chains, schedule: Arc<Board>) -> Admin {
        Admin { chains, schedule }
    }

    /// The turn kernel.
    pub(crate) fn engine(&self) -> &Engine {
        self.chains.engine()
    }

    /// The chains a command starts, shows and stops.
    pub(crate) fn chains(&self) -> &Chains {
        &self.chains
    }

    /// Every heartbeat's and cron entry's next due time, as the scheduler wrote it.
    pub(crate) fn schedule(&self) -> &Board {
        &self.schedule
    }
}

#[cfg(test)]
mod tests {
    use baton_contract::{
        AccountId, ChatId, ChatKind, InboundEvent, MessageId, Platform, Sender, UserId,
    };
    use chrono::{TimeZone, Utc};

    use crate::dispatcher::Handled;
    use crate::gateway::testing::{echo_config, parts};

    /// `/baton status` from the admin `root`, message `n`.
    fn status(n: u32) -> InboundEvent {
        let sender = Sender {
            id: UserId::from("root"),
            name: "root".to_owned(),
            is_bot: false,
            is_self: false,
        };
        InboundEvent::text_message(
            Platform::Local,
            AccountId::from("hb"),
            ChatId::from("ops"),
            ChatKind::Group,
            sender,
            MessageId::from(format!("m{n}")),
            "/baton status",
        )
    }

    /// The admin commands show the board the gateway's scheduler writes: no schedule before
    /// its first tick, each job's next due time after it.
    #[tokio::test]
    async fn status_shows_what_the_scheduler_wrote() {
        let extra =
            "heartbeat = { every = \"30m\", target = \"none\" }\n\n[admins]\nlocal = [\"root\"]\n";
        let config =
            echo_config(&["hb"], extra).replace("[gateway]\n", "[gateway]\ntimezone = \"UTC\"\n");
        let gw = parts(&config).await;
        let answer = |handled: Handled| match handled {
            Handled::Admin(answer) => answer,
            other => panic!("not answered as a command: {other:?}"),
        };
        let before = answer(gw.dispatcher.handle(status(1)).await);
        assert!(!before.contains("Scheduled:"), "{before}");
        let monday = Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap();
        gw.scheduler.tick(monday).await;
        let after = answer(gw.dispatcher.handle(status(2)).await);
        assert!(
            after.contains("Scheduled:\n- hb heartbeat: next at 2025-03-03 "),
            "{after}"
        );
    }
}
