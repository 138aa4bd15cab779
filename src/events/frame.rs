//! An event as `/api/events` sends it, made once: every reader of the stream sends these same
//! bytes, so ten readers cost ten writes of one frame, not ten serialisations of the event
//! (issue 18's benchmark: that cost the pipeline two thirds of its rate). It is made by the
//! first reader that sends the event, not when the event is emitted: with nobody reading the
//! stream (most of the time) no event is serialised at all, and with readers the work is done
//! on their tasks, off the path from a message to its reply (issue 23: 4% of an event's
//! instructions).

use std::fmt::Write as _;

use bytes::{Bytes, BytesMut};

use super::Event;

/// The server-sent-event frame of `event` stamped `id` at `ts_ms` by gateway run `run`: an `id:`
/// line (`<run>.<id>`), one `data:` line with the stamped event's JSON, and the blank line that
/// ends an event.
pub(super) fn frame(event: &Event, run: &str, id: u64, ts_ms: i64) -> Bytes {
    let json = serde_json::to_string(event).expect("events serialise");
    // The event is an object, `{"type":...}`; stamped it reads `{"id":N,"ts_ms":T,"type":...}`,
    // exactly what serialising `Stamped` (its stamp, then the event flattened) writes.
    // Compact JSON has no line break, so one `data:` line holds it.
    let fields = json.strip_prefix('{').expect("an event is a JSON object");
    let mut frame = BytesMut::with_capacity(json.len() + 64);
    write!(
        frame,
        "id: {run}.{id}\ndata: {{\"id\":{id},\"ts_ms\":{ts_ms},{fields}\n\n"
    )
    .expect("writing to memory");
    frame.freeze()
}

#[cfg(test)]
mod tests {
    use super::super::{Events, Received};
    use super::*;

    /// The frame's `data:` line is the stamped event's own serialisation, for events with and
    /// without optional fields and with a renamed one.
    #[test]
    fn a_frame_is_the_id_and_the_stamped_event_as_json() {
        let events = Events::default();
        let sent = [
            Event::Chain {
                chain: "ch-1".into(),
                step: "turn_given".into(),
                bot: None,
                holder: "caid".into(),
                state: "open".into(),
            },
            Event::EventReceived {
                platform: baton_contract::Platform::Local,
                account: "a".into(),
                bot: "caid".parse().unwrap(),
                chat: baton_contract::ChatKey::new(
                    baton_contract::Platform::Local,
                    &"room \"1\"\nsecond line".into(),
                    None,
                ),
                message_id: "m1".into(),
                sender: "u".into(),
                outcome: Received::Dropped,
                reason: Some("duplicate".into()),
            },
        ];
        for event in sent {
            events.emit(event);
        }
        let backlog = events.subscribe(Some(0)).backlog;
        assert_eq!(backlog.len(), 2);
        for stamped in backlog {
            let json = serde_json::to_string(&*stamped).unwrap();
            let expected = format!("id: {}.{}\ndata: {json}\n\n", events.run(), stamped.id);
            assert_eq!(std::str::from_utf8(stamped.frame()).unwrap(), expected);
        }
    }
}
