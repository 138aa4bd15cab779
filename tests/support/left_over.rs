//! An event as a gateway killed mid-turn leaves it: accepted by the local account `snark` in
//! room `ops`, never finished. Tests write it into a store themselves, then start a gateway on
//! that store and watch what the restart does with it.

use baton_contract::{ChatKind, InboundEvent, Platform, Sender, UserId};

/// Alice's mention of `snark` in room `ops`, message id `m-left`.
pub fn mention_of_snark(text: &str) -> InboundEvent {
    let sender = Sender {
        id: "alice".into(),
        name: "alice".into(),
        is_bot: false,
        is_self: false,
    };
    let mut event = InboundEvent::text_message(
        Platform::Local,
        "snark".into(),
        "ops".into(),
        ChatKind::Group,
        sender,
        "m-left".into(),
        text,
    );
    event.mentions = vec![UserId::from("snark")];
    event
}
