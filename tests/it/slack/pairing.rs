//! DM pairing: one code, an admin approves, an expired code fails clearly.

use super::*;

/// The pairing code in a bot's pairing notice.
pub(super) fn code_in(text: &str) -> String {
    let at = text.find("approve ").expect("a code in the notice") + "approve ".len();
    text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect()
}

#[tokio::test]
async fn dm_pairing_issues_one_code_an_admin_approves_and_an_expired_code_fails_clearly() {
    let extra = "\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"pairing\"\n";
    let w = world("socket", extra).await;
    let dm = |user: &str, n: u32, text: &str| {
        let ts = format!("1700000001.0000{n:02}");
        let mut event = said(user, &format!("D_{user}"), &ts, text);
        event["channel_type"] = "im".into();
        events_envelope(
            &format!("dm-{n}"),
            0,
            event_body("A_snark", &format!("EvD{n}"), "message", event),
        )
    };
    let admin_says = |n: u32, text: &str| {
        let ts = format!("1700000002.0000{n:02}");
        let event = said(ADMIN, "C1", &ts, text);
        events_envelope(
            &format!("adm-{n}"),
            0,
            event_body("A_snark", &format!("EvA{n}"), "message", event),
        )
    };

    w.deliver("snark", dm("U_STRANGER", 1, "hi")).await;
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].channel, "D_U_STRANGER");
    let code = code_in(&posts[0].text);
    assert_eq!(code.len(), 8, "{}", posts[0].text);
    assert_eq!(w.model.requests().len(), 0, "nothing else: no model turn");

    // A second DM within the hour: no new code, no second notice (rate-limited).
    w.deliver("snark", dm("U_STRANGER", 2, "hello?")).await;
    assert_eq!(w.slack.posts().len(), 1);
    let pairings = w.gateway.gateway.store().pairings().await.unwrap();
    assert_eq!(pairings.len(), 1);
    assert_eq!(pairings[0].code, code);

    w.deliver(
        "snark",
        admin_says(1, &format!("/baton pairing approve {code}")),
    )
    .await;
    let approved = w.slack.posts().last().unwrap().text.clone();
    assert!(
        approved.starts_with("Approved U_STRANGER on slack"),
        "{approved}"
    );

    w.model.script("snark", Step::reply("welcome in"));
    w.deliver("snark", dm("U_STRANGER", 3, "hi again")).await;
    let last = w.slack.posts().last().unwrap().clone();
    assert_eq!(
        (last.channel.as_str(), last.text.as_str()),
        ("D_U_STRANGER", "welcome in")
    );

    // A code not approved within the hour fails clearly, and the sender gets a new one.
    w.deliver("snark", dm("U_LATE", 4, "hi")).await;
    let old = code_in(&w.slack.posts().last().unwrap().text);
    let db = rusqlite::Connection::open(&w.db).unwrap();
    db.execute(
        "UPDATE pairing SET created_ms = created_ms - 3600001 WHERE user = 'U_LATE'",
        [],
    )
    .unwrap();
    w.deliver(
        "snark",
        admin_says(2, &format!("/baton pairing approve {old}")),
    )
    .await;
    let expired = w.slack.posts().last().unwrap().text.clone();
    assert!(
        expired.contains(&format!("Code {old}")) && expired.contains("has expired"),
        "{expired}"
    );
    let audit = w.gateway.gateway.store().audit_log(10).await.unwrap();
    assert_eq!(audit[0].command, format!("/baton pairing approve {old}"));
    assert!(
        audit[0].outcome.starts_with("error: Code"),
        "{:?}",
        audit[0]
    );
    assert_eq!(audit[1].outcome, "ok", "the first approval is audited too");
    w.gateway.stop().await;
}
