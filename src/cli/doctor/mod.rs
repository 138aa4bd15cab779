//! `baton doctor`: a live check of every account and backend in the config against the real
//! platform (its `api_url`) and model server. The checks run concurrently, each cut off after
//! `--timeout-seconds` (10 s at most); one line each, `ok`, `warn` or `fail`, naming the
//! account or bot and what to do. It only asks: it opens no platform connection (asking for a
//! connection URL is fine), posts nothing, serves nothing and opens no database. One file per
//! platform, each turning one account into its findings (Telegram's with the adapter's own
//! identity check).

mod backend;
mod discord;
mod feishu;
mod slack;
#[cfg(feature = "telegram")]
mod telegram;

use std::fmt;
use std::path::Path;
use std::time::Duration;

use clap::Args;
use futures::FutureExt as _;
use futures::future::join_all;

use crate::config::{AccountConfig, Config, Secret, resolve_secret};
use baton_contract::Platform;

/// How long each check may take.
#[derive(Debug, Args)]
pub(super) struct DoctorArgs {
    /// Seconds each account's or backend's check may take before it is a `fail`.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10))]
    timeout_seconds: u64,
}

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Ok,
    Warn,
    Fail,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
        })
    }
}

/// One line of the report.
#[derive(Debug)]
pub(super) struct Finding {
    verdict: Verdict,
    /// `slack/snark`, `bot snark`.
    subject: String,
    /// What was checked: `login`, `scopes`, `model`.
    check: &'static str,
    /// What was found and, for a `warn` or `fail`, what to do. Never a secret.
    detail: String,
}

impl Finding {
    fn new(verdict: Verdict, subject: &str, check: &'static str, detail: String) -> Self {
        Self {
            verdict,
            subject: subject.to_owned(),
            check,
            detail,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<4}  {:<22} {}: {}",
            self.verdict, self.subject, self.check, self.detail
        )
    }
}

/// One account's or backend's check: its subject and the findings it reached.
type Checked = Vec<Finding>;

/// Runs `baton doctor`.
pub(super) async fn doctor(path: &Path, args: DoctorArgs) -> anyhow::Result<()> {
    let config = super::load(path)?;
    let limit = Duration::from_secs(args.timeout_seconds);
    let client = reqwest::Client::builder()
        .timeout(limit)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let env = |name: &str| std::env::var(name).ok();
    let mut checks = Vec::new();
    for account in &config.accounts {
        if account.platform == Platform::Local {
            continue;
        }
        let subject = format!("{}/{}", account.platform, account.account_id());
        let check = account_check(&config, account, &client, &env);
        checks.push(bounded(subject, "login", limit, check).boxed_local());
    }
    for bot in &config.bots {
        if let Some(check) = backend::check(&config, bot, &client, &env) {
            checks.push(bounded(format!("bot {}", bot.id), "backend", limit, check).boxed_local());
        }
    }
    let findings: Vec<Finding> = join_all(checks).await.into_iter().flatten().collect();
    if findings.is_empty() {
        println!("nothing to check: the config has no platform account and no openai bot");
    }
    for finding in &findings {
        println!("{finding}");
    }
    let failed = findings
        .iter()
        .filter(|f| f.verdict == Verdict::Fail)
        .count();
    if failed > 0 {
        anyhow::bail!("{failed} of {} checks failed", findings.len());
    }
    Ok(())
}

/// The findings for one account, by its platform.
async fn account_check(
    config: &Config,
    account: &AccountConfig,
    client: &reqwest::Client,
    env: &dyn Fn(&str) -> Option<String>,
) -> Checked {
    let subject = format!("{}/{}", account.platform, account.account_id());
    let secret = |key: Option<&str>| resolve_secret(key, env);
    match account.platform {
        Platform::Slack => slack::check(config, account, &subject, client, &secret).await,
        Platform::Discord => discord::check(account, &subject, client, &secret).await,
        Platform::Feishu | Platform::Lark => {
            feishu::check(account, &subject, client, &secret).await
        }
        #[cfg(feature = "telegram")]
        Platform::Telegram => telegram::check(account, &subject, &secret).await,
        #[cfg(not(feature = "telegram"))]
        Platform::Telegram => Vec::new(),
        Platform::Local => Vec::new(),
    }
}

/// `check`, cut off at `limit`: a check that does not finish is one `fail` saying so.
async fn bounded(
    subject: String,
    check: &'static str,
    limit: Duration,
    run: impl Future<Output = Checked>,
) -> Checked {
    match tokio::time::timeout(limit, run).await {
        Ok(found) => found,
        Err(_) => vec![Finding::new(
            Verdict::Fail,
            &subject,
            check,
            format!(
                "no answer within {} s; check that its api_url (or base_url) is right and \
                 reachable from this machine",
                limit.as_secs()
            ),
        )],
    }
}

/// The account's API base: its `api_url`, or the platform's host, without a trailing slash.
fn api_url<'a>(account: &'a AccountConfig, default: &'a str) -> &'a str {
    account
        .api_url
        .as_deref()
        .unwrap_or(default)
        .trim_end_matches('/')
}

/// A secret an account names, looked up in the environment.
type SecretOf<'a> = dyn Fn(Option<&str>) -> Option<Secret> + 'a;

/// A request that got no HTTP answer, said without the URL's query or any header.
fn unreachable(subject: &str, check: &'static str, url: &str, err: &reqwest::Error) -> Finding {
    let why = if err.is_timeout() {
        "no answer in time".to_owned()
    } else if err.is_connect() {
        "cannot connect".to_owned()
    } else {
        err.to_string()
    };
    Finding::new(
        Verdict::Fail,
        subject,
        check,
        format!("{url}: {why}; check the api_url and this machine's network"),
    )
}
