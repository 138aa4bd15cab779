//! Each account's connection state, announced on the event stream as it changes (the adapter
//! sets it in a watch cell; this wakes on each change).

use baton_contract::ConnectionState;
use tokio_util::sync::CancellationToken;

use crate::events::{Event, Events};
use crate::roster::Account;

/// Announce `account`'s connection state now and at every change, until `stop` fires.
pub(super) async fn announce(events: Events, account: &Account, stop: CancellationToken) {
    let mut changes = account.adapter.connection().watch();
    loop {
        let state = *changes.borrow_and_update();
        events.emit(event(account, state));
        tokio::select! {
            () = stop.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

fn event(account: &Account, state: ConnectionState) -> Event {
    Event::Connection {
        platform: account.platform.as_str().to_owned(),
        account: account.id.to_string(),
        bot: account.bot.id().to_owned(),
        state: state.as_str().to_owned(),
        attempt: state.attempt(),
    }
}
