//! Telegram: the bot token logs in (`getMe`), and the bot sees every group message (Group
//! Privacy off), which `activation = "always"`, the history buffer and other bots' posts need.

use super::{Checked, Finding, SecretOf, Verdict};
use crate::config::AccountConfig;
use baton_telegram::TELEGRAM_API_URL;
use baton_telegram::setup::{IdentityError, check_identity};

pub(super) async fn check(
    account: &AccountConfig,
    subject: &str,
    secret: &SecretOf<'_>,
) -> Checked {
    let api = super::api_url(account, TELEGRAM_API_URL);
    let Some(token) = secret(account.bot_token_env.as_deref()) else {
        return vec![Finding::new(
            Verdict::Fail,
            subject,
            "login",
            "bot_token_env names no set variable; export the token @BotFather gave you".into(),
        )];
    };
    let identity = match check_identity(api, token).await {
        Ok(identity) => identity,
        Err(err @ IdentityError::BadToken) => {
            return vec![Finding::new(
                Verdict::Fail,
                subject,
                "login",
                err.to_string(),
            )];
        }
        Err(err @ IdentityError::Unreachable(_)) => {
            return vec![Finding::new(
                Verdict::Fail,
                subject,
                "login",
                format!("{err}; check that api_url is right and reachable from this machine"),
            )];
        }
    };
    let mut found = vec![Finding::new(
        Verdict::Ok,
        subject,
        "login",
        format!("bot @{} ({})", identity.username, identity.id),
    )];
    found.push(if identity.reads_all_group_messages {
        Finding::new(
            Verdict::Ok,
            subject,
            "privacy",
            "Group Privacy is off".into(),
        )
    } else {
        Finding::new(
            Verdict::Warn,
            subject,
            "privacy",
            "Group Privacy is on, so the bot sees only commands, mentions and replies in \
             groups; in @BotFather send /setprivacy, pick the bot, choose Disable, then add it \
             to the group again"
                .into(),
        )
    });
    found
}
