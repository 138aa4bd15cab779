//! What `baton setup telegram` and `baton doctor` will call: the identity check says who the bot
//! is (and whether Group Privacy is off), or that the token is wrong, in words an operator can
//! act on.

use baton_contract::Secret;
use baton_telegram::setup::{BOTFATHER_STEPS, IdentityError, check_identity};

use super::*;

#[tokio::test]
async fn the_identity_check_names_the_bot_or_the_bad_token() {
    let telegram = FakeTelegram::start().await;
    telegram.bot("snark", SNARK.0, SNARK.1);
    let me = check_identity(&telegram.api_url, Secret::new("tok-snark"))
        .await
        .unwrap();
    assert_eq!((me.id, me.username.as_str()), (SNARK.0, SNARK.1));
    assert!(me.reads_all_group_messages, "privacy is off on the fake");
    let refused = check_identity(&telegram.api_url, Secret::new("tok-nobody"))
        .await
        .unwrap_err();
    assert_eq!(refused, IdentityError::BadToken);
    assert!(refused.to_string().contains("@BotFather"));
    let closed = crate::support::turns::closed_port_url().await;
    let unreachable = check_identity(&closed, Secret::new("tok-snark"))
        .await
        .unwrap_err();
    assert!(matches!(unreachable, IdentityError::Unreachable(_)));
    assert!(
        !unreachable.to_string().contains("tok-snark"),
        "never the token: {unreachable}"
    );
    // The guidance says what the bot needs in @BotFather.
    let steps = BOTFATHER_STEPS.join("\n");
    assert!(steps.contains("/setprivacy") && steps.contains("bot-to-bot"));
}
