//! What the pipeline's unit tests share, over [`crate::gateway::testing::parts`]: a message to
//! one bot's local account, the [`Inbound`] a step is given for it, and a bot's question
//! waiting for a human's answer, a store that refuses writes.
//! A step's rules can then be tested one call at a time, with the state the gateway builds.

use baton_contract::{AccountId, ChatId, ChatKind, InboundEvent, MessageId, Platform, Sender};

use super::{Dispatcher, Inbound};
use crate::engine::Engine;
use crate::pen::Arrival;
use crate::session::SessionKey;
use crate::store::{Escalation, EscalationKind, NewEscalation, Store};

/// The bots of the configs these tests build (`echo_config(&["alpha", "beta"], …)`): a
/// sender named after one of them is a bot.
const BOTS: [&str; 2] = ["alpha", "beta"];

/// Message `m<n>` saying `text` to bot `to`'s local account in the group `chat`, by `from`
/// (a bot when it is `alpha` or `beta`), mentioning `to`.
pub(super) fn to_bot(to: &str, n: u32, chat: &str, from: &str, text: &str) -> InboundEvent {
    let sender = Sender {
        id: from.into(),
        name: from.to_owned(),
        is_bot: BOTS.contains(&from),
        is_self: false,
    };
    let mut event = InboundEvent::text_message(
        Platform::Local,
        AccountId::from(to),
        ChatId::from(chat),
        ChatKind::Group,
        sender,
        MessageId::from(format!("m{n}")),
        text,
    );
    event.mentions = vec![to.into()];
    event
}

/// `event` as the steps are given it, fresh and not filed, received by its own account.
pub(super) fn inbound(dispatcher: &Dispatcher, event: InboundEvent) -> Inbound<'_> {
    let account = dispatcher
        .engine
        .roster()
        .account(event.platform, &event.account)
        .expect("the event's account is in the config");
    dispatcher.inbound(event, account, Arrival::Fresh, None)
}

/// A question bot `asker` asked from its chat `ops`, posted in `room` through `alpha`'s
/// account and waiting for an answer there.
pub(super) async fn asked(engine: &Engine, asker: &str) -> Escalation {
    let origin: SessionKey = "bot:alpha:local:alpha:room".parse().expect("session key");
    let question = NewEscalation {
        kind: EscalationKind::Question,
        bot: asker.parse().expect("bot id"),
        session: format!("bot:{asker}:local:{asker}:ops")
            .parse()
            .expect("session key"),
        chat_key: origin.chat_key(),
        origin,
        text: "which branch?".into(),
    };
    let created = engine.store().create_escalation(question, 0).await;
    created.expect("the question is recorded")
}

/// Makes the SQLite `store` refuse every `statement` (`INSERT`, `DELETE`) on `table`, as a
/// database that cannot write refuses it, until [`allow`].
pub(super) async fn refuse(store: &Store, statement: &str, table: &str) {
    let trigger = format!(
        "CREATE TRIGGER refuse BEFORE {statement} ON {table} \
         BEGIN SELECT RAISE(ABORT, 'refused'); END"
    );
    store
        .write(move |db| db.execute(&trigger, &[]))
        .await
        .expect("refusing");
}

/// Takes back [`refuse`]: the store writes again.
pub(super) async fn allow(store: &Store) {
    let drop = "DROP TRIGGER refuse";
    store
        .write(move |db| db.execute(drop, &[]))
        .await
        .expect("allowing");
}
