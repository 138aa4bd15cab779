//! Pipeline step 2: deduplicate, durably.
//!
//! Platforms redeliver: Slack retries after 3 s, Feishu after a missing ack, and a restart may
//! replay. Each event is claimed in the store under its message id, per account, and the claim
//! is committed before the event is acknowledged. So Slack's `app_mention` + `message` pair (two
//! event ids, one message id) is one event, and a redelivery a day later, after any number of
//! restarts, is still a duplicate. The key is the store's ([`crate::store::dedupe_key`]): a
//! sibling post handed over by delivery (`src/post/handover.rs`) is claimed under the same
//! one, so it and the platform's own copy of that message are one event.

pub(crate) use crate::store::dedupe_scope as scope_of;

#[cfg(test)]
mod tests {
    use baton_contract::{ChatKind, Platform, Sender};

    use baton_contract::InboundEvent;

    use super::*;
    use crate::store::{Claim, Store, StoreError, dedupe_key};

    async fn claim(store: &Store, event: &InboundEvent, now_ms: i64) -> Result<Claim, StoreError> {
        let scope = scope_of(event.platform, &event.account);
        store.claim(&scope, &dedupe_key(event), now_ms).await
    }

    fn event(event_id: Option<&str>, message_id: &str) -> InboundEvent {
        let sender = Sender {
            id: "U1".into(),
            name: "alice".into(),
            is_bot: false,
            is_self: false,
        };
        let mut e = InboundEvent::text_message(
            Platform::Slack,
            "snark".into(),
            "C1".into(),
            ChatKind::Group,
            sender,
            message_id.into(),
            "hi",
        );
        e.event_id = event_id.map(str::to_owned);
        e
    }

    #[tokio::test]
    async fn app_mention_and_message_pair_is_one_event() {
        let store = Store::open(":memory:").await.unwrap();
        let mention = event(Some("Ev1"), "1700.000100");
        let message = event(Some("Ev2"), "1700.000100");
        assert_eq!(claim(&store, &mention, 0).await.unwrap(), Claim::Fresh);
        assert_eq!(claim(&store, &message, 1).await.unwrap(), Claim::Duplicate);
    }

    #[tokio::test]
    async fn a_retry_is_a_duplicate_and_the_next_message_is_not() {
        let store = Store::open(":memory:").await.unwrap();
        let first = event(Some("Ev1"), "1700.000100");
        assert_eq!(claim(&store, &first, 0).await.unwrap(), Claim::Fresh);
        assert_eq!(claim(&store, &first, 1).await.unwrap(), Claim::Duplicate);
        let next = event(Some("Ev3"), "1700.000200");
        assert_eq!(claim(&store, &next, 2).await.unwrap(), Claim::Fresh);
    }

    /// Records made when an event was claimed under its event id too keep their message key
    /// as it was: a redelivery of such an event is still recognised.
    #[tokio::test]
    async fn a_record_made_before_still_recognises_its_message() {
        let store = Store::open(":memory:").await.unwrap();
        let old = event(Some("Ev1"), "1700.000100");
        let scope = scope_of(old.platform, &old.account);
        for key in ["evt:Ev1", "msg:1700.000100"] {
            store.claim(&scope, key, 0).await.unwrap();
        }
        assert_eq!(claim(&store, &old, 1).await.unwrap(), Claim::Duplicate);
    }

    #[tokio::test]
    async fn each_account_claims_separately() {
        let store = Store::open(":memory:").await.unwrap();
        let a = event(None, "m1");
        let mut b = a.clone();
        b.account = "caid".into();
        assert_eq!(claim(&store, &a, 0).await.unwrap(), Claim::Fresh);
        assert_eq!(claim(&store, &b, 0).await.unwrap(), Claim::Fresh);
        assert_eq!(claim(&store, &a, 0).await.unwrap(), Claim::Duplicate);
    }
}
