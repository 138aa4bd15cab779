//! Discord messages to the contract's [`InboundEvent`] (pipeline step 1).
//!
//! Works on serenity's typed models, which the gateway hands over already parsed. What a message
//! means for *this* bot needs two things the message does not carry, so they come from the
//! [`Directory`] the gateway keeps up to date:
//!
//! - the bot's managed role in each guild: typing `@Bot` in Discord's client often inserts the
//!   bot's *role* (`<@&id>`) instead of its user, and that must wake the bot like a user mention;
//! - which channels are threads, and their parents: a message in a thread carries only the
//!   thread's channel id, but chat policy (`[[chats]]`, allowlists) is set on the parent channel.
//!
//! Message ids are Discord snowflakes, unique across Discord, so they are the dedupe key as they
//! are; Discord has no delivery id (the gateway's sequence number restarts with every session).

use std::collections::HashMap;

use baton_contract::{
    AccountId, ChatId, ChatKind, CommandReply, FileRef, InboundEvent, InboundFile, InboundKind,
    MessageId, Platform, Sender, ThreadId, UserId, leading_mentions,
};
use serenity::model::application::{CommandDataOption, CommandDataOptionValue, CommandInteraction};
use serenity::model::channel::{ChannelType, GuildChannel, Message, MessageType};
use serenity::model::guild::Role;
use serenity::model::id::{ChannelId, GuildId, RoleId};

/// Who this account is on Discord, from READY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The bot user's id: mentions of the bot carry it, and its posts are authored by it.
    pub user_id: String,
    /// The bot user's name, used when rewriting a mention of its role.
    pub name: String,
}

/// What the gateway has learned about the guilds: the bot's own role per guild and the parent of
/// every known thread. Filled from GUILD_CREATE, GUILD_ROLE_*, THREAD_* events, and for a channel
/// none of them named, from `GET /channels/<id>` (the first message in a new thread can arrive
/// before, or without, its THREAD_CREATE).
#[derive(Debug, Default, Clone)]
pub struct Directory {
    bot_roles: HashMap<GuildId, RoleId>,
    /// Every guild channel seen, with its parent when it is a thread.
    channels: HashMap<ChannelId, Option<ChannelId>>,
}

impl Directory {
    /// Note `role` if it is the managed role Discord created for the bot `me` when it joined.
    pub fn role(&mut self, guild: GuildId, role: &Role, me: &str) {
        if role.tags.bot_id.is_some_and(|b| b.to_string() == me) {
            self.bot_roles.insert(guild, role.id);
        }
    }

    /// Note a guild channel; a thread is remembered with its parent.
    pub fn channel(&mut self, channel: &GuildChannel) {
        let parent = channel.parent_id.filter(|_| is_thread(channel.kind));
        self.note(channel.id, parent);
    }

    /// Note a guild channel by id: `parent` is set when it is a thread.
    pub fn note(&mut self, channel: ChannelId, parent: Option<ChannelId>) {
        self.channels.insert(channel, parent);
    }

    /// Whether the channel has been seen (as a thread or not).
    pub fn knows(&self, channel: ChannelId) -> bool {
        self.channels.contains_key(&channel)
    }

    /// Forget a deleted thread.
    pub fn forget_thread(&mut self, thread: ChannelId) {
        self.channels.remove(&thread);
    }

    /// The parent channel of `thread`, when it is a known thread.
    pub fn parent_of(&self, thread: ChannelId) -> Option<ChannelId> {
        self.channels.get(&thread).copied().flatten()
    }

    /// The bot's managed role in `guild`, when known.
    pub fn bot_role(&self, guild: Option<GuildId>) -> Option<RoleId> {
        guild.and_then(|g| self.bot_roles.get(&g)).copied()
    }
}

fn is_thread(kind: ChannelType) -> bool {
    matches!(
        kind,
        ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread
    )
}

/// Why a message produced no event. Each is normal traffic, logged at debug level only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// A join notice, pin, thread-created notice or another message type that is not something
    /// said (only DEFAULT and REPLY are).
    MessageType(u8),
    /// An interaction that is not the `/baton` command.
    NotOurCommand(String),
}

/// Normalize a MESSAGE_CREATE for the account `me`.
pub fn message(
    account: &AccountId,
    me: &Identity,
    directory: &Directory,
    msg: &Message,
) -> Result<InboundEvent, Skip> {
    if !matches!(msg.kind, MessageType::Regular | MessageType::InlineReply) {
        return Err(Skip::MessageType(u8::from(msg.kind)));
    }
    let author = &msg.author;
    let author_id = author.id.to_string();
    // Webhook posts are bot-authored for baton's purposes (pipeline step 7): an integration or
    // another gateway's relay must not wake bots unless the chat allows it.
    let is_bot = author.bot || msg.webhook_id.is_some();
    let name = msg
        .member
        .as_ref()
        .and_then(|m| m.nick.clone())
        .or_else(|| author.global_name.clone())
        .unwrap_or_else(|| author.name.clone());
    let sender = Sender {
        is_self: author_id == me.user_id,
        id: UserId(author_id),
        name,
        is_bot,
    };
    let (chat, thread, chat_kind) = place(msg.guild_id, msg.channel_id, directory);
    let bot_role = directory.bot_role(msg.guild_id);
    let (text, mut mentions) = rewrite_mentions(&msg.content, msg, me, bot_role);
    for user in &msg.mentions {
        push_unique(&mut mentions, UserId(user.id.to_string()));
    }
    if bot_role.is_some_and(|r| msg.mention_roles.contains(&r)) {
        push_unique(&mut mentions, UserId(me.user_id.clone()));
    }
    let mut out = InboundEvent::text_message(
        Platform::Discord,
        account.clone(),
        chat,
        chat_kind,
        sender,
        MessageId(msg.id.to_string()),
        text,
    );
    out.thread = thread;
    out.leading_mentions = leading_mentions(&msg.content, user_mention);
    out.mentions = mentions;
    out.mentions_everyone = msg.mention_everyone;
    if msg.kind == MessageType::InlineReply
        && let Some(reference) = &msg.message_reference
    {
        out.reply_to = reference.message_id.map(|m| MessageId(m.to_string()));
        // `referenced_message` is null when the original was deleted: then nobody is replied to.
        out.reply_to_author = msg
            .referenced_message
            .as_ref()
            .map(|r| UserId(r.author.id.to_string()));
    }
    out.timestamp_ms = snowflake_ms(msg.id.get());
    // Attachments come with the message's content: in a guild, only with the MESSAGE_CONTENT
    // intent (or when the message mentions the bot).
    out.files = msg
        .attachments
        .iter()
        .map(|a| InboundFile {
            name: a.filename.clone(),
            media_type: a.content_type.clone(),
            size: Some(u64::from(a.size)),
            source: FileRef(a.url.clone()),
        })
        .collect();
    out.raw = serde_json::to_value(msg).unwrap_or(serde_json::Value::Null);
    Ok(out)
}

/// The command name baton registers.
pub const COMMAND_NAME: &str = "baton";

/// Normalize an application command interaction for `/baton`. `text` is the command line after
/// `/baton` (`activation always`, `approve ap-1 ok`), as the contract's `Command` kind expects.
pub fn interaction(
    account: &AccountId,
    directory: &Directory,
    command: &CommandInteraction,
) -> Result<InboundEvent, Skip> {
    if command.data.name != COMMAND_NAME {
        return Err(Skip::NotOurCommand(command.data.name.clone()));
    }
    let user = command
        .member
        .as_ref()
        .map(|m| &m.user)
        .unwrap_or(&command.user);
    let sender = Sender {
        id: UserId(user.id.to_string()),
        name: user
            .global_name
            .clone()
            .unwrap_or_else(|| user.name.clone()),
        is_bot: user.bot,
        is_self: false,
    };
    let (mut chat, mut thread, chat_kind) = place(command.guild_id, command.channel_id, directory);
    // Interactions carry their channel: a thread there is known even if no THREAD event was seen.
    if thread.is_none()
        && let Some(channel) = &command.channel
        && is_thread(channel.kind)
        && let Some(parent) = channel.parent_id
    {
        chat = ChatId(parent.to_string());
        thread = Some(ThreadId(channel.id.to_string()));
    }
    Ok(command_event(
        account, chat, thread, chat_kind, sender, command,
    ))
}

fn command_event(
    account: &AccountId,
    chat: ChatId,
    thread: Option<ThreadId>,
    chat_kind: ChatKind,
    sender: Sender,
    command: &CommandInteraction,
) -> InboundEvent {
    let mut out = InboundEvent::text_message(
        Platform::Discord,
        account.clone(),
        chat,
        chat_kind,
        sender,
        // A command is not a message; its interaction id is unique per invocation.
        MessageId(format!("cmd:{}", command.id)),
        command_line(&command.data.options),
    );
    out.thread = thread;
    out.kind = InboundKind::Command {
        reply: CommandReply {
            token: reply_token(command.id.get(), &command.token),
        },
    };
    out.timestamp_ms = snowflake_ms(command.id.get());
    // The raw interaction holds its token, a capability to answer as the bot: keep it out of
    // transcripts.
    out.raw = serde_json::Value::Null;
    out
}

/// The reply handle for an interaction: `<interaction id>:<token>` (the callback URL needs both).
pub fn reply_token(id: u64, token: &str) -> String {
    format!("{id}:{token}")
}

/// Split a handle made by [`reply_token`].
pub fn split_reply_token(handle: &str) -> Option<(&str, &str)> {
    handle
        .split_once(':')
        .filter(|(id, token)| !id.is_empty() && !token.is_empty())
}

/// The options of `/baton <subcommand> ...` as the text command line: subcommand (group) names
/// first, then the option values in the order Discord sent them (which is the declared order).
pub fn command_line(options: &[CommandDataOption]) -> String {
    let mut words: Vec<String> = Vec::new();
    fn walk(options: &[CommandDataOption], words: &mut Vec<String>) {
        for option in options {
            match &option.value {
                CommandDataOptionValue::SubCommand(inner)
                | CommandDataOptionValue::SubCommandGroup(inner) => {
                    words.push(option.name.clone());
                    walk(inner, words);
                }
                CommandDataOptionValue::String(s) => words.push(s.trim().to_owned()),
                CommandDataOptionValue::Integer(n) => words.push(n.to_string()),
                CommandDataOptionValue::Boolean(b) => words.push(b.to_string()),
                CommandDataOptionValue::Number(n) => words.push(n.to_string()),
                CommandDataOptionValue::User(u) => words.push(format!("<@{u}>")),
                _ => {}
            }
        }
    }
    walk(options, &mut words);
    words.retain(|w| !w.is_empty());
    words.join(" ")
}

/// Chat, thread and kind of a channel: DMs have no guild; a known thread is a thread of its
/// parent channel.
fn place(
    guild: Option<GuildId>,
    channel: ChannelId,
    directory: &Directory,
) -> (ChatId, Option<ThreadId>, ChatKind) {
    if guild.is_none() {
        return (ChatId(channel.to_string()), None, ChatKind::Dm);
    }
    match directory.parent_of(channel) {
        Some(parent) => (
            ChatId(parent.to_string()),
            Some(ThreadId(channel.to_string())),
            ChatKind::Group,
        ),
        None => (ChatId(channel.to_string()), None, ChatKind::Group),
    }
}

/// A user mention `<@id>` / `<@!id>` at the start of `text`: the user id and the token's
/// length. A role mention is not counted (its bot is listed after the users, out of order),
/// so a message opening with one is for everyone it mentions.
fn user_mention(text: &str) -> Option<(String, usize)> {
    let inner = text.strip_prefix("<@")?;
    let end = inner.find('>')?;
    let token = &inner[..end];
    let id = token.strip_prefix('!').unwrap_or(token);
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| (id.to_owned(), end + 3))
}

/// Rewrite `<@id>` / `<@!id>` to `@name` (the user's name from `mentions`, or the id) and the
/// bot's own role `<@&id>` to `@<bot name>`, collecting mentioned user ids in order. Other markup
/// (channels, other roles, emoji) is left as it is.
fn rewrite_mentions(
    content: &str,
    msg: &Message,
    me: &Identity,
    bot_role: Option<RoleId>,
) -> (String, Vec<UserId>) {
    let mut out = String::with_capacity(content.len());
    let mut ids = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("<@") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('>') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        if let Some(role) = inner.strip_prefix('&') {
            if bot_role.is_some_and(|r| r.to_string() == role) {
                out.push('@');
                out.push_str(&me.name);
            } else {
                out.push_str(&rest[start..start + 2 + end + 1]);
            }
        } else {
            let id = inner.strip_prefix('!').unwrap_or(inner);
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
                let name = msg
                    .mentions
                    .iter()
                    .find(|u| u.id.to_string() == id)
                    .map(|u| u.name.as_str())
                    .unwrap_or(id);
                out.push('@');
                out.push_str(name);
                push_unique(&mut ids, UserId(id.to_owned()));
            } else {
                out.push_str(&rest[start..start + 2 + end + 1]);
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    (out, ids)
}

fn push_unique(ids: &mut Vec<UserId>, id: UserId) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

/// Milliseconds since the Unix epoch at which a snowflake was made (its top 42 bits, from the
/// Discord epoch 2015-01-01).
pub fn snowflake_ms(id: u64) -> i64 {
    ((id >> 22) + 1_420_070_400_000) as i64
}

/// The keys under which serenity 0.12's models hold an `ImageHash` (avatars, icons, banners).
const IMAGE_HASH_KEYS: &[&str] = &[
    "asset",
    "avatar",
    "badge",
    "banner",
    "cover_image",
    "discovery_splash",
    "icon",
    "icon_hash",
    "image",
    "splash",
];

/// Whether every image hash in `value` is ASCII, as Discord's hex hashes always are.
///
/// serenity 0.12's `ImageHash::from_str` slices a 32- or 34-byte hash two bytes at a time and
/// panics when a non-ASCII character straddles a cut (found by `fuzz/`, target
/// `discord_dispatch`); serenity's current code still does. So a body must pass this before it
/// is handed to serenity's models: the HTTP interactions endpoint refuses one that does not.
/// Public for the endpoint and the fuzz targets.
pub fn image_hashes_are_ascii(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Object(map) => map.iter().all(|(key, value)| match value {
            Value::String(s) if IMAGE_HASH_KEYS.contains(&key.as_str()) => s.is_ascii(),
            _ => image_hashes_are_ascii(value),
        }),
        Value::Array(items) => items.iter().all(image_hashes_are_ascii),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn leading_mentions_are_the_addressees() {
        use super::*;
        let count = |text| leading_mentions(text, user_mention);
        assert_eq!(count("<@80351110224678912> ask <@123>: write a haiku"), 1);
        assert_eq!(count("<@!1> <@2>, hi"), 2);
        assert_eq!(count("can <@1> help?"), 0);
        assert_eq!(count("<@&55> ask <@1>"), 0);
    }

    use serde_json::{Value, json};

    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The `d` of a dispatch fixture, edited by `edit`, as serenity's model.
    fn msg(name: &str, edit: impl FnOnce(&mut Value)) -> Message {
        let mut d = fixture(name)["d"].clone();
        edit(&mut d);
        serde_json::from_value(d).unwrap()
    }

    /// The bot the fixtures mention: "Nelly".
    fn nelly() -> Identity {
        Identity {
            user_id: "80351110224678912".into(),
            name: "Nelly".into(),
        }
    }

    fn account() -> AccountId {
        "nelly".into()
    }

    const GUILD: u64 = 290_926_798_626_357_999;
    const CHANNEL: &str = "290926798999357250";

    fn normalize(m: &Message) -> InboundEvent {
        message(&account(), &nelly(), &Directory::default(), m).unwrap()
    }

    #[test]
    fn a_guild_mention_resolves_to_the_bots_user_id() {
        let e = normalize(&msg("gw_dispatch_message_create_guild_mention", |_| {}));
        assert_eq!(e.mentions, vec![UserId::from("80351110224678912")]);
        assert_eq!(e.text, "@Nelly what's the weather?");
        assert_eq!(e.message_id.as_str(), "334385199974967042");
        assert_eq!(e.chat.as_str(), CHANNEL);
        assert_eq!(e.chat_kind, ChatKind::Group);
        assert_eq!(e.thread, None);
        assert_eq!(e.event_id, None);
        assert_eq!(e.sender.id.as_str(), "53908099506183680");
        assert_eq!(e.sender.name, "Mason");
        assert!(!e.sender.is_bot && !e.sender.is_self);
        assert_eq!(e.reply_to_author, None);
        // From the id, which Discord makes from the creation time (the docs' example `timestamp`
        // field was written by hand and is 17 s off its id).
        assert_eq!(e.timestamp_ms, 1_499_794_044_250);
        assert_eq!(e.raw["id"], "334385199974967042");
    }

    /// A message attachment in the shape the Discord docs give: fetched from its `url`.
    #[test]
    fn attachments_are_described_for_download() {
        let e = normalize(&msg("gw_dispatch_message_create_guild_mention", |d| {
            d["attachments"] = json!([{
                "id": "1100000000000000001", "filename": "shot.png", "size": 68,
                "content_type": "image/png", "width": 1, "height": 1,
                "url": "https://cdn.discordapp.com/attachments/1/2/shot.png?ex=1&is=2&hm=3",
                "proxy_url": "https://media.discordapp.net/attachments/1/2/shot.png"
            }]);
        }));
        assert_eq!(e.files.len(), 1);
        let file = &e.files[0];
        assert_eq!(file.name, "shot.png");
        assert_eq!(file.media_type.as_deref(), Some("image/png"));
        assert_eq!(file.size, Some(68));
        assert!(
            file.source
                .0
                .starts_with("https://cdn.discordapp.com/attachments/1/2/shot.png")
        );
    }

    #[test]
    fn the_legacy_nickname_form_and_an_unlisted_mention_still_count() {
        let e = normalize(&msg("gw_dispatch_message_create_guild_mention", |d| {
            d["content"] = "<@!80351110224678912> and <@111> hi".into();
            d["mentions"] = json!([]);
        }));
        assert_eq!(
            e.mentions,
            vec![UserId::from("80351110224678912"), UserId::from("111")]
        );
        assert_eq!(e.text, "@80351110224678912 and @111 hi");
    }

    #[test]
    fn a_mention_of_the_bots_managed_role_counts_as_a_mention() {
        let role: Role = serde_json::from_value(json!({
            "id": "41771983423143938", "name": "Nelly", "color": 0, "hoist": false,
            "position": 3, "permissions": "0", "managed": true, "mentionable": false,
            "flags": 0, "tags": { "bot_id": "80351110224678912" },
            "colors": { "primary_color": 0, "secondary_color": null, "tertiary_color": null }
        }))
        .unwrap();
        let mut dir = Directory::default();
        dir.role(GuildId::new(GUILD), &role, &nelly().user_id);
        let m = msg("gw_dispatch_message_create_guild_mention", |d| {
            d["content"] = "<@&41771983423143938> <@&5> weather?".into();
            d["mentions"] = json!([]);
            d["mention_roles"] = json!(["41771983423143938", "5"]);
        });
        let e = message(&account(), &nelly(), &dir, &m).unwrap();
        assert_eq!(e.mentions, vec![UserId::from("80351110224678912")]);
        assert_eq!(e.text, "@Nelly <@&5> weather?");
        // Another guild's role of the same id is not the bot's.
        let elsewhere = msg("gw_dispatch_message_create_guild_mention", |d| {
            d["guild_id"] = "1".into();
            d["mentions"] = json!([]);
            d["content"] = "<@&41771983423143938>".into();
            d["mention_roles"] = json!(["41771983423143938"]);
        });
        assert!(
            message(&account(), &nelly(), &dir, &elsewhere)
                .unwrap()
                .mentions
                .is_empty()
        );
    }

    #[test]
    fn a_reply_to_the_bots_message_names_the_bot_as_replied_to() {
        let e = normalize(&msg("gw_dispatch_message_create_reply", |d| {
            // The reply does not ping: the bot is not in `mentions`, yet it was replied to.
            d["mentions"] = json!([]);
        }));
        assert_eq!(e.reply_to, Some(MessageId::from("334385199974967041")));
        assert_eq!(e.reply_to_author, Some(UserId::from("80351110224678912")));
        assert!(e.mentions.is_empty());
        let deleted = normalize(&msg("gw_dispatch_message_create_reply", |d| {
            d["referenced_message"] = Value::Null;
        }));
        assert_eq!(deleted.reply_to_author, None, "nobody to have replied to");
    }

    #[test]
    fn bots_webhooks_and_the_bot_itself_are_told_apart() {
        let other = normalize(&msg("gw_dispatch_message_create_from_bot", |_| {}));
        assert!(other.sender.is_bot && !other.sender.is_self);
        let webhook = normalize(&msg("gw_dispatch_message_create_guild_mention", |d| {
            d["webhook_id"] = "223704706495545344".into();
        }));
        assert!(webhook.sender.is_bot, "a webhook post is bot-authored");
        let me = Identity {
            user_id: "159985870458322944".into(),
            name: "OtherBot".into(),
        };
        let own = msg("gw_dispatch_message_create_from_bot", |_| {});
        let e = message(&account(), &me, &Directory::default(), &own).unwrap();
        assert!(e.sender.is_self);
    }

    #[test]
    fn a_thread_is_a_thread_of_its_parent_channel_and_a_dm_has_no_guild() {
        let thread: GuildChannel = serde_json::from_value(json!({
            "id": CHANNEL, "type": 11, "guild_id": GUILD.to_string(), "parent_id": "1000",
            "name": "a thread", "position": 0, "permission_overwrites": [], "nsfw": false,
            "thread_metadata": { "archived": false, "auto_archive_duration": 1440,
                "archive_timestamp": "2017-07-11T17:27:07.299000+00:00", "locked": false }
        }))
        .unwrap();
        let mut dir = Directory::default();
        dir.channel(&thread);
        let m = msg("gw_dispatch_message_create_guild_mention", |_| {});
        let e = message(&account(), &nelly(), &dir, &m).unwrap();
        assert_eq!(e.chat.as_str(), "1000");
        assert_eq!(e.thread, Some(ThreadId::from(CHANNEL)));
        assert_eq!(e.chat_kind, ChatKind::Group);
        dir.forget_thread(ChannelId::new(CHANNEL.parse().unwrap()));
        assert_eq!(
            message(&account(), &nelly(), &dir, &m).unwrap().thread,
            None
        );

        let dm = normalize(&msg("gw_dispatch_message_create_guild_mention", |d| {
            d.as_object_mut().unwrap().remove("guild_id");
            d.as_object_mut().unwrap().remove("member");
        }));
        assert_eq!(dm.chat_kind, ChatKind::Dm);
    }

    #[test]
    fn notices_are_skipped() {
        let join = msg("gw_dispatch_message_create_guild_mention", |d| {
            d["type"] = 7.into();
        });
        assert_eq!(
            message(&account(), &nelly(), &Directory::default(), &join).unwrap_err(),
            Skip::MessageType(7)
        );
    }

    #[test]
    fn baton_interactions_become_private_commands() {
        let d = fixture("gw_dispatch_interaction_create_baton")["d"].clone();
        let command: CommandInteraction = serde_json::from_value(d.clone()).unwrap();
        let e = interaction(&account(), &Directory::default(), &command).unwrap();
        assert_eq!(e.text, "status");
        assert_eq!(e.sender.id.as_str(), "53908232506183680");
        assert_eq!(e.message_id.as_str(), "cmd:786008729715212338");
        assert_eq!(e.chat.as_str(), "645027906669510667");
        assert_eq!(e.raw, Value::Null, "the token stays out of transcripts");
        match &e.kind {
            InboundKind::Command { reply } => {
                assert_eq!(
                    split_reply_token(&reply.token),
                    Some(("786008729715212338", "A_UNIQUE_TOKEN"))
                );
            }
            InboundKind::Message => panic!("expected a command"),
        }
        let mut other = d;
        other["data"]["name"] = "cardsearch".into();
        let other: CommandInteraction = serde_json::from_value(other).unwrap();
        assert_eq!(
            interaction(&account(), &Directory::default(), &other).unwrap_err(),
            Skip::NotOurCommand("cardsearch".into())
        );
    }

    #[test]
    fn fuzz_regression_a_non_ascii_image_hash_is_refused_before_serenity_reads_it() {
        let ok = fixture("interaction_slash_command_docs");
        assert!(image_hashes_are_ascii(&ok));
        // The avatar of the crashing input: 34 bytes, `a_`, and a character across bytes 1..3
        // of the hex part, where serenity cuts.
        let mut bad = ok.clone();
        bad["member"]["user"]["avatar"] = json!("a_d\u{31a}fa99b3eeaa7dd43acca82f5692432");
        assert_eq!(bad["member"]["user"]["avatar"].as_str().unwrap().len(), 34);
        assert!(!image_hashes_are_ascii(&bad));
        let mut nested = ok;
        nested["data"]["resolved"] = json!({"users": {"1": {"avatar": "é".repeat(16)}}});
        assert!(!image_hashes_are_ascii(&nested));
    }

    #[test]
    fn a_command_run_in_a_thread_is_placed_in_that_thread() {
        let mut d = fixture("gw_dispatch_interaction_create_baton")["d"].clone();
        d["channel"]["type"] = 11.into();
        d["channel"]["parent_id"] = "1000".into();
        let command: CommandInteraction = serde_json::from_value(d).unwrap();
        let e = interaction(&account(), &Directory::default(), &command).unwrap();
        assert_eq!(e.chat.as_str(), "1000");
        assert_eq!(e.thread, Some(ThreadId::from("645027906669510667")));
    }
}
