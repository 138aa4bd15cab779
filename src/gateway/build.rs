//! The resolved stage of the config: bots with their backends, accounts with their adapters.

use std::sync::Arc;

use baton_contract::{AccountId, Adapter, Platform};

use super::StartError;
use crate::backend::{
    A2aBackend, Backend, CommandBackend, EchoBackend, HttpBackend, ModelOptions, OpenAiBackend,
    OpenAiSettings, Reaper,
};
use crate::config::{AccountConfig, BackendKind, BotConfig, Config, resolve_secret};
use crate::local::{LocalAdapter, LocalHub, NameRules};
use crate::roster::{Account, Backends, Bot, Roster, ToolSet, glob_set};

/// Environment lookup, injectable for tests.
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Supplies the adapter of a configured account in place of the one its platform would get.
///
/// It exists so that a program embedding the gateway can feed the real pipeline through an
/// adapter of its own while everything else (bots, backends, chat rules, guards, store) is
/// built exactly as `baton run` builds it. The benchmark harness (`benches/pipeline.rs`) uses
/// it to put an in-memory adapter behind an account; `baton run` never sets one.
///
/// ```
/// use baton::gateway::AdapterOverride;
///
/// // Every account keeps its platform's adapter.
/// let none = AdapterOverride::none();
/// # let _ = none;
/// ```
#[derive(Clone)]
pub struct AdapterOverride {
    build: Option<Arc<OverrideFn>>,
}

type OverrideFn = dyn Fn(&AccountConfig) -> Option<Arc<dyn Adapter>> + Send + Sync;

impl AdapterOverride {
    /// No override: every account gets its platform's adapter.
    pub fn none() -> Self {
        Self { build: None }
    }

    /// Ask `build` for each configured account's adapter; where it answers `None`, the account
    /// gets its platform's adapter. The adapter returned must report the account's platform
    /// and id ([`Adapter::platform`], [`Adapter::account`]).
    pub fn new(
        build: impl Fn(&AccountConfig) -> Option<Arc<dyn Adapter>> + Send + Sync + 'static,
    ) -> Self {
        Self {
            build: Some(Arc::new(build)),
        }
    }

    fn adapter_for(&self, account: &AccountConfig) -> Option<Arc<dyn Adapter>> {
        self.build.as_ref().and_then(|build| build(account))
    }
}

impl std::fmt::Debug for AdapterOverride {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdapterOverride")
            .field("set", &self.build.is_some())
            .finish()
    }
}

/// Build every bot and account. Every bot without a `local` account gets one implicitly, so the
/// terminal chat and `/v1/chat/completions` reach every bot.
pub(crate) fn roster(
    config: &Config,
    hub: &Arc<LocalHub>,
    env: Env<'_>,
    adapters: &AdapterOverride,
    reaper: &Reaper,
) -> Result<Roster, StartError> {
    let bots = config
        .bots
        .iter()
        .map(|bot| build_bot(config, bot, env, reaper).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let mut accounts = Vec::with_capacity(config.accounts.len() + bots.len());
    // Feishu/Lark accounts of one platform learn each other's bot names (docs/platforms/feishu.md).
    #[cfg(feature = "feishu")]
    let feishu_siblings = [baton_feishu::Siblings::new(), baton_feishu::Siblings::new()];
    // Telegram accounts learn each other's @usernames (mentions name bots by username).
    #[cfg(feature = "telegram")]
    let telegram_directory = baton_telegram::Directory::new();
    for account in &config.accounts {
        let bot = bots
            .iter()
            .find(|b| b.id() == account.bot.as_str())
            .expect("validation checked every account's bot");
        if let Some(adapter) = adapters.adapter_for(account) {
            accounts.push(Account {
                platform: account.platform,
                id: AccountId::from(account.account_id()),
                bot: Arc::clone(bot),
                adapter,
            });
            continue;
        }
        let built = match account.platform {
            Platform::Local => local_account(hub, account.account_id(), bot),
            #[cfg(feature = "slack")]
            Platform::Slack => slack_account(account, bot, env)?,
            #[cfg(feature = "feishu")]
            Platform::Feishu | Platform::Lark => {
                let siblings = &feishu_siblings[usize::from(account.platform == Platform::Lark)];
                feishu_account(account, bot, siblings, env)?
            }
            #[cfg(feature = "discord")]
            Platform::Discord => discord_account(account, bot, env)?,
            #[cfg(feature = "telegram")]
            Platform::Telegram => {
                let public_url = config.gateway.public_url.as_deref();
                telegram_account(account, bot, &telegram_directory, public_url, env)?
            }
            // Only reachable in a build without one of the adapters' features.
            #[cfg(not(all(
                feature = "slack",
                feature = "discord",
                feature = "feishu",
                feature = "telegram"
            )))]
            platform => {
                return Err(StartError::AdapterUnavailable {
                    platform,
                    account: account.account_id().to_owned(),
                });
            }
        };
        accounts.push(built);
    }
    for bot in &bots {
        let has_local = accounts
            .iter()
            .any(|a: &Account| a.platform == Platform::Local && a.bot.id() == bot.id());
        if !has_local {
            accounts.push(local_account(hub, bot.id().as_str(), bot));
        }
    }
    Ok(Roster::new(bots, accounts))
}

fn local_account(hub: &Arc<LocalHub>, id: &str, bot: &Arc<Bot>) -> Account {
    let id = AccountId::from(id);
    let adapter = LocalAdapter::new(Arc::clone(hub), id.clone(), bot.id().to_string());
    Account {
        platform: Platform::Local,
        id,
        bot: Arc::clone(bot),
        adapter: Arc::new(adapter),
    }
}

/// A Slack account: its tokens from the environment, its mode, its API base.
#[cfg(feature = "slack")]
fn slack_account(
    account: &crate::config::AccountConfig,
    bot: &Arc<Bot>,
    env: Env<'_>,
) -> Result<Account, StartError> {
    use baton_slack::{Mode, SlackAdapter, SlackSettings};
    let id = AccountId::from(account.account_id());
    let missing = |key: &str| missing_env(&id, key);
    let mode = match account.mode.as_deref() {
        Some("events") => Mode::Events,
        _ => Mode::Socket,
    };
    let bot_token = resolve_secret(account.bot_token_env.as_deref(), env)
        .ok_or_else(|| missing("bot_token_env"))?;
    let mut settings = SlackSettings::new(id.clone(), mode, bot_token);
    settings.app_token = resolve_secret(account.app_token_env.as_deref(), env);
    settings.signing_secret = resolve_secret(account.signing_secret_env.as_deref(), env);
    if mode == Mode::Socket && settings.app_token.is_none() {
        return Err(missing("app_token_env"));
    }
    if mode == Mode::Events && settings.signing_secret.is_none() {
        return Err(missing("signing_secret_env"));
    }
    settings.app_id = account.app_id.clone();
    if let Some(url) = &account.api_url {
        settings.api_url = url.clone();
    }
    Ok(Account {
        platform: Platform::Slack,
        id,
        bot: Arc::clone(bot),
        adapter: Arc::new(SlackAdapter::new(settings)),
    })
}

/// A Feishu or Lark account: app credentials from the environment, its mode, its host.
#[cfg(feature = "feishu")]
fn feishu_account(
    account: &crate::config::AccountConfig,
    bot: &Arc<Bot>,
    siblings: &baton_feishu::Siblings,
    env: Env<'_>,
) -> Result<Account, StartError> {
    use baton_feishu::{FeishuAdapter, FeishuSettings, Mode};
    let id = AccountId::from(account.account_id());
    let missing = |key: &str| missing_env(&id, key);
    let mode = match account.mode.as_deref() {
        Some("webhook") => Mode::Webhook,
        _ => Mode::Websocket,
    };
    let app_id = account
        .app_id
        .clone()
        .ok_or_else(|| StartError::AccountSetup {
            account: id.to_string(),
            message: "`app_id` is missing; copy it (cli_...) from the app's Credentials page"
                .into(),
        })?;
    let app_secret = resolve_secret(account.app_secret_env.as_deref(), env)
        .ok_or_else(|| missing("app_secret_env"))?;
    let mut settings = FeishuSettings::new(account.platform, id.clone(), mode, app_id, app_secret);
    settings.verification_token = resolve_secret(account.verification_token_env.as_deref(), env);
    settings.encrypt_key = resolve_secret(account.encrypt_key_env.as_deref(), env);
    if mode == Mode::Webhook && settings.verification_token.is_none() {
        return Err(missing("verification_token_env"));
    }
    if let Some(url) = &account.api_url {
        settings.api_url = url.clone();
    }
    settings.siblings = siblings.clone();
    Ok(Account {
        platform: account.platform,
        id,
        bot: Arc::clone(bot),
        adapter: Arc::new(FeishuAdapter::new(settings)),
    })
}

/// A Discord account: its token from the environment, its application, its API base.
#[cfg(feature = "discord")]
fn discord_account(
    account: &crate::config::AccountConfig,
    bot: &Arc<Bot>,
    env: Env<'_>,
) -> Result<Account, StartError> {
    use baton_discord::{DiscordAdapter, DiscordSettings};
    let id = AccountId::from(account.account_id());
    let bot_token = resolve_secret(account.bot_token_env.as_deref(), env)
        .ok_or_else(|| missing_env(&id, "bot_token_env"))?;
    let mut settings = DiscordSettings::new(id.clone(), bot_token);
    settings.application_id = account.application_id.clone();
    settings.public_key = account.public_key.clone();
    settings.command_guilds = account.command_guilds.clone();
    if let Some(url) = &account.api_url {
        settings.api_url = url.clone();
    }
    let adapter = DiscordAdapter::new(settings).map_err(|e| StartError::AccountSetup {
        account: id.to_string(),
        message: e.to_string(),
    })?;
    Ok(Account {
        platform: Platform::Discord,
        id,
        bot: Arc::clone(bot),
        adapter: Arc::new(adapter),
    })
}

/// A Telegram account: its token (and webhook secret) from the environment, its mode, its host.
#[cfg(feature = "telegram")]
fn telegram_account(
    account: &crate::config::AccountConfig,
    bot: &Arc<Bot>,
    directory: &baton_telegram::Directory,
    public_url: Option<&str>,
    env: Env<'_>,
) -> Result<Account, StartError> {
    use baton_telegram::{Mode, TelegramAdapter, TelegramSettings};
    let id = AccountId::from(account.account_id());
    let mode = match account.mode.as_deref() {
        Some("webhook") => Mode::Webhook,
        _ => Mode::Polling,
    };
    let bot_token = resolve_secret(account.bot_token_env.as_deref(), env)
        .ok_or_else(|| missing_env(&id, "bot_token_env"))?;
    let mut settings = TelegramSettings::new(id.clone(), mode, bot_token);
    settings.secret_token = resolve_secret(account.secret_token_env.as_deref(), env);
    if mode == Mode::Webhook && settings.secret_token.is_none() {
        return Err(missing_env(&id, "secret_token_env"));
    }
    settings.public_url = public_url.map(str::to_owned);
    if let Some(url) = &account.api_url {
        settings.api_url = url.clone();
    }
    settings.directory = directory.clone();
    Ok(Account {
        platform: Platform::Telegram,
        id,
        bot: Arc::clone(bot),
        adapter: Arc::new(TelegramAdapter::new(settings)),
    })
}

fn build_bot(
    config: &Config,
    bot: &BotConfig,
    env: Env<'_>,
    reaper: &Reaper,
) -> Result<Bot, StartError> {
    let system_prompt = match (&bot.system_prompt, &bot.system_prompt_file) {
        (Some(text), _) => text.clone(),
        (None, Some(file)) => {
            let path = config.base_dir.join(file);
            std::fs::read_to_string(&path).map_err(|source| StartError::PromptFile {
                bot: bot.id.clone(),
                path,
                source,
            })?
        }
        (None, None) => String::new(),
    };
    let patterns = glob_set(&bot.tools)?;
    Ok(Bot {
        id: bot.id.parse()?,
        tools: ToolSet::from_globs(&patterns),
        system_prompt,
        backends: backends(config, bot, env, reaper)?,
        config: bot.clone(),
    })
}

/// The bot's own backend, and one of each other kind its chats give it.
fn backends(
    config: &Config,
    bot: &BotConfig,
    env: Env<'_>,
    reaper: &Reaper,
) -> Result<Backends, StartError> {
    let mut built = Backends::new(bot.backend, backend(config, bot, bot.backend, env, reaper)?);
    for kind in config.backend_kinds(bot).into_iter().skip(1) {
        built = built.with(kind, backend(config, bot, kind, env, reaper)?);
    }
    Ok(built)
}

/// The bot's backend of `kind`, from its settings for that kind.
fn backend(
    config: &Config,
    bot: &BotConfig,
    kind: BackendKind,
    env: Env<'_>,
    reaper: &Reaper,
) -> Result<Arc<dyn Backend>, StartError> {
    let bad = |e: crate::backend::BackendError| StartError::Backend {
        bot: bot.id.clone(),
        message: e.to_string(),
    };
    Ok(match kind {
        BackendKind::Echo => Arc::new(EchoBackend::new()),
        BackendKind::Openai => {
            let defaults = &config.backends.openai;
            let configured = bot.base_url.as_deref().or(defaults.base_url.as_deref());
            let base_url =
                OpenAiSettings::resolve_base_url(configured, env("OPENAI_BASE_URL").as_deref());
            let key_env = bot
                .api_key_env
                .as_deref()
                .or(defaults.api_key_env.as_deref());
            let mut settings = OpenAiSettings::new(base_url, bot.model.clone().unwrap_or_default())
                .with_api_key(resolve_secret(key_env, env));
            settings.options = ModelOptions {
                temperature: bot.temperature,
                max_tokens: bot.max_tokens,
                top_p: bot.top_p,
                reasoning_effort: bot.reasoning_effort.clone(),
                extra_body: bot.extra_body.clone().unwrap_or_default(),
            };
            settings.max_read = max_read(config);
            Arc::new(OpenAiBackend::new(settings).map_err(bad)?)
        }
        BackendKind::Http => Arc::new(
            HttpBackend::new(bot.url.clone().unwrap_or_default())
                .map_err(bad)?
                .with_max_read(max_read(config)),
        ),
        BackendKind::A2a => Arc::new(
            A2aBackend::new(
                bot.url.clone().unwrap_or_default(),
                resolve_secret(bot.token_env.as_deref(), env),
            )
            .map_err(bad)?
            .with_max_read(max_read(config)),
        ),
        BackendKind::Command => {
            let mut command = CommandBackend::new(bot.command.clone(), reaper.clone(), env)
                .with_env(&bot.env, env)
                .with_max_read(max_read(config));
            if let Some(dir) = &bot.workdir {
                command = command.with_workdir(config.base_dir.join(dir));
            }
            Arc::new(command)
        }
    })
}

/// The names no local sender may take: every bot's id and display name, and look-alikes of the
/// local admins' names.
pub(crate) fn sender_names(config: &Config) -> NameRules {
    let bots = config
        .bots
        .iter()
        .flat_map(|bot| [bot.id.as_str(), bot.display_name()]);
    NameRules::new(bots, config.admins.local.iter().map(String::as_str))
}

/// The most of one answer a backend reads: a reply of `[limits] max_reply_bytes` even if every
/// character is JSON-escaped, inline files (or an `openai` model's tool arguments) of
/// `[artifacts] max_bytes` in base64, and a margin for the rest of the envelope. Past it the
/// turn fails.
fn max_read(config: &Config) -> usize {
    let files = usize::try_from(config.artifacts.max_bytes / 3 * 4).unwrap_or(usize::MAX);
    config
        .limits
        .max_reply_bytes
        .saturating_mul(2)
        .saturating_add(files)
        .saturating_add(64 * 1024)
}

/// An account key naming an environment variable that is not set.
#[cfg(any(
    feature = "slack",
    feature = "feishu",
    feature = "discord",
    feature = "telegram"
))]
fn missing_env(account: &AccountId, key: &str) -> StartError {
    StartError::AccountSetup {
        account: account.to_string(),
        message: format!(
            "`{key}` names no set environment variable; `baton check` lists what is missing"
        ),
    }
}
