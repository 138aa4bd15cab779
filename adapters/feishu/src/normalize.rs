//! `im.message.receive_v1` to the contract's [`InboundEvent`] (pipeline step 1).
//!
//! Works on the raw JSON: Feishu adds fields freely, and an unknown shape must be skipped, never
//! fail the connection. The webhook and the long connection carry the same schema-2.0 body.
//!
//! Identity is per app on Feishu: an `open_id` names a user *as one app sees them*, so the same
//! person (or bot) has a different `open_id` in every app. A mention is therefore resolved only
//! against the receiving account's own `open_id` (from `bot/v3/info`): `@BotA @BotB` reaches app
//! A with A's own id in the mentions and app B with B's own id, so each wakes exactly once and
//! neither mistakes the other's id for its own.
//!
//! Another app's message reaches a bot only when it @mentions the bot and the bot's app has the
//! `im:message.group_at_msg.include_bot:readonly` scope; it comes with `sender_type` `app`. Its
//! author is mapped to a sibling baton bot where it is one ([`Siblings`]): baton posted the
//! message itself (its id is remembered), the event names the sibling's app id, or the sender's
//! id is the one under which this app was shown the sibling in a mention by name; failing all
//! of those, the adapter reads the message's sender app from the API. Then it is
//! the same author, and by its message id the same event, as the post baton hands over itself.
//!
//! One thing crosses apps on purpose: whether a mentioned id is *another baton bot*. A chat set
//! to `activation = "always"` must not answer `@Caid fix this` from Snark's side, and the
//! gateway tells bots from people by their own `open_id`s. So a mention that is not this bot but
//! carries the app name of a sibling baton bot on the same platform is reported with that
//! sibling's own `open_id` ([`Me::sibling`]). It never makes a mention count as this bot's.
//!
//! The message's `content` is a JSON string: `{"text": "@_user_1 hi"}` for text, a rich-text
//! tree for `post`. `@_user_N` placeholders are keys into `mentions[]` and are rewritten to
//! `@Name`; `@_all` sets [`InboundEvent::mentions_everyone`], which wakes a bot only where the
//! chat sets `respond_to_at_all`.

use std::collections::{HashMap, HashSet};

use baton_contract::{
    AccountId, ChatId, ChatKind, InboundEvent, MessageId, Platform, Sender, ThreadId, UserId,
    leading_mentions,
};
use serde_json::Value;

use crate::Siblings;
use crate::resources;

/// The only event type that carries chat messages.
pub const MESSAGE_RECEIVE: &str = "im.message.receive_v1";

/// Why a body produced no event. Each is normal traffic, logged at debug level only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// Another event type (reactions, chat changes, `url_verification`, ...).
    NotAMessage(String),
    /// A message kind baton does not read (image, file, sticker, card, ...).
    Unsupported(String),
    /// A required field is absent.
    Malformed(&'static str),
    /// The event names another app (`header.app_id`): its ids mean nothing to this account.
    OtherApp(String),
}

/// What the receiving account knows about itself.
pub struct Me<'a> {
    /// Its platform (`feishu` or `lark`).
    pub platform: Platform,
    /// Its account id.
    pub account: &'a AccountId,
    /// Its app id (`cli_…`): events for another app are refused.
    pub app_id: &'a str,
    /// Its bot's `open_id`, from `bot/v3/info`.
    pub open_id: &'a str,
    /// Whether a message id is one this account posted (for replies to the bot).
    pub posted: &'a dyn Fn(&str) -> bool,
    /// The other baton bots on the platform.
    pub siblings: &'a Siblings,
}

/// The event id of a schema-2.0 body (`header.event_id`) or a 1.0 one (`uuid`).
pub fn event_id(body: &Value) -> Option<&str> {
    body.pointer("/header/event_id")
        .and_then(Value::as_str)
        .or_else(|| body.get("uuid").and_then(Value::as_str))
}

/// The event type of a schema-2.0 body (`header.event_type`) or a 1.0 one (`event.type`).
pub fn event_type(body: &Value) -> &str {
    body.pointer("/header/event_type")
        .or_else(|| body.pointer("/event/type"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Normalize an `im.message.receive_v1` body for the account `me`.
pub fn message_receive(me: &Me<'_>, body: &Value) -> Result<InboundEvent, Skip> {
    let kind = event_type(body);
    if kind != MESSAGE_RECEIVE {
        return Err(Skip::NotAMessage(kind.to_owned()));
    }
    if let Some(app) = body.pointer("/header/app_id").and_then(Value::as_str)
        && app != me.app_id
    {
        return Err(Skip::OtherApp(app.to_owned()));
    }
    let message = body
        .pointer("/event/message")
        .ok_or(Skip::Malformed("event.message"))?;
    let str_of = |key: &str| {
        message
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let message_id = str_of("message_id").ok_or(Skip::Malformed("message_id"))?;
    let chat_id = str_of("chat_id").ok_or(Skip::Malformed("chat_id"))?;
    let sender = body
        .pointer("/event/sender")
        .ok_or(Skip::Malformed("event.sender"))?;
    let sender_type = sender.get("sender_type").and_then(Value::as_str);
    let sender_id = if sender_type == Some("user") {
        sender
            .pointer("/sender_id/open_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
    } else {
        app_sender(me, message_id, sender)
    }
    .ok_or(Skip::Malformed("sender.sender_id.open_id"))?;
    let mentions = Mentions::of(message, me);
    let message_type = str_of("message_type").unwrap_or("");
    let content = str_of("content").unwrap_or("{}");
    let (text, everyone) = read_content(message_type, content, &mentions)
        .ok_or_else(|| Skip::Unsupported(message_type.to_owned()))?;
    let files = serde_json::from_str(content)
        .map(|content: Value| resources::files_of(message_type, &content, message_id))
        .unwrap_or_default();
    let sender = Sender {
        is_self: sender_id == me.open_id,
        id: UserId(sender_id),
        // The event names nobody; a name costs a contact-API call and a permission.
        name: String::new(),
        is_bot: sender_type != Some("user"),
    };
    let chat_kind = match str_of("chat_type") {
        Some("p2p") => ChatKind::Dm,
        _ => ChatKind::Group,
    };
    let mut out = InboundEvent::text_message(
        me.platform,
        me.account.clone(),
        ChatId::from(chat_id),
        chat_kind,
        sender,
        MessageId::from(message_id),
        text,
    );
    out.event_id = event_id(body).map(str::to_owned);
    // A topic thread has a `thread_id`; a reply chain outside one shares its `root_id`.
    out.thread = str_of("thread_id")
        .or(str_of("root_id"))
        .map(ThreadId::from);
    out.reply_to = str_of("parent_id").map(MessageId::from);
    out.reply_to_author = str_of("parent_id")
        .filter(|parent| (me.posted)(parent))
        .map(|_| UserId::from(me.open_id));
    // Only a text message says what comes first; a `post` is for everyone it mentions.
    if message_type == "text" {
        let text: Value = serde_json::from_str(content).unwrap_or_default();
        let text = text.get("text").and_then(Value::as_str).unwrap_or("");
        out.leading_mentions = mentions.leading(text);
    }
    out.mentions = mentions.ids;
    out.mentions_everyone = everyone;
    out.timestamp_ms = str_of("create_time")
        .or_else(|| body.pointer("/header/create_time").and_then(Value::as_str))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    out.files = files;
    out.raw = without_token(body);
    Ok(out)
}

/// The author of a message another app posted (`sender_type` `app`, delivered with the
/// `im:message.group_at_msg.include_bot:readonly` scope), as the gateway knows it: a sibling
/// baton bot by its own `open_id` (baton posted this very message, the event names its app id,
/// or this app saw the sibling under that id in a mention by name), any other app by the id the
/// event gives.
fn app_sender(me: &Me<'_>, message_id: &str, sender: &Value) -> Option<String> {
    let ids = sender.get("sender_id");
    let id_of = |key: &str| {
        ids.and_then(|ids| ids.get(key))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
    };
    me.siblings
        .poster_of(message_id)
        .or_else(|| {
            ["app_id", "user_id", "open_id"]
                .into_iter()
                .filter_map(id_of)
                .find_map(|id| me.siblings.open_id_of_app(id))
        })
        .or_else(|| id_of("open_id").and_then(|id| me.siblings.alias_of(me.app_id, id)))
        .or_else(|| {
            id_of("open_id")
                .or_else(|| id_of("app_id"))
                .map(str::to_owned)
        })
}

/// `body` for the transcript: the verification token it carries is a secret, so it is removed.
fn without_token(body: &Value) -> Value {
    let mut raw = body.clone();
    if let Some(header) = raw.get_mut("header").and_then(Value::as_object_mut) {
        header.remove("token");
    }
    if let Some(top) = raw.as_object_mut() {
        top.remove("token");
    }
    raw
}

/// The message's `mentions[]`: placeholder keys to names, and the mentioned `open_id`s.
struct Mentions {
    /// `@_user_N` (and `open_id`s, which `post` may use) to display names.
    names: HashMap<String, String>,
    /// `open_id`s in order of appearance (the keys are numbered that way).
    ids: Vec<UserId>,
    /// A mention entry for `@_all`.
    all: bool,
    /// The placeholder keys (`@_user_N`) that stand for someone with an `open_id`.
    people: HashSet<String>,
}

impl Mentions {
    fn of(message: &Value, me: &Me<'_>) -> Mentions {
        let mut out = Mentions {
            names: HashMap::new(),
            ids: Vec::new(),
            all: false,
            people: HashSet::new(),
        };
        let entries = message.get("mentions").and_then(Value::as_array);
        for entry in entries.into_iter().flatten() {
            let key = entry.get("key").and_then(Value::as_str).unwrap_or("");
            let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
            let open_id = entry.pointer("/id/open_id").and_then(Value::as_str);
            if key == "@_all" {
                out.all = true;
                continue;
            }
            let shown = if name.is_empty() {
                open_id.unwrap_or(key)
            } else {
                name
            };
            if !key.is_empty() {
                out.names.insert(key.to_owned(), shown.to_owned());
            }
            if let Some(id) = open_id.filter(|id| !id.is_empty()) {
                if !key.is_empty() {
                    out.people.insert(key.to_owned());
                }
                out.names.insert(id.to_owned(), shown.to_owned());
                let sibling = (id != me.open_id)
                    .then(|| me.siblings.open_id_of(name))
                    .flatten()
                    .filter(|own| own != me.open_id);
                if let Some(own) = &sibling {
                    // This app's id for the sibling: a message it posts comes with it.
                    me.siblings.alias(me.app_id, id, own);
                }
                out.ids
                    .push(UserId(sibling.unwrap_or_else(|| id.to_owned())));
            }
        }
        out
    }

    /// How many people the placeholders opening a text message's `text` name: its addressees.
    fn leading(&self, text: &str) -> usize {
        leading_mentions(text, |rest| {
            let name = rest.strip_prefix('@')?;
            let len = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(name.len());
            let key = &rest[..len + 1];
            self.people.contains(key).then(|| (key.to_owned(), len + 1))
        })
    }

    /// `text` with every `@_user_N` placeholder rewritten to `@Name`, and `@_all` to `@all`.
    fn rewrite(&self, text: &str) -> (String, bool) {
        let mut keys: Vec<&String> = self.names.keys().filter(|k| k.starts_with('@')).collect();
        // Longest first, so `@_user_1` never eats the start of `@_user_10`.
        keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
        let mut out = text.to_owned();
        for key in keys {
            out = out.replace(key.as_str(), &format!("@{}", self.names[key]));
        }
        let everyone = self.all || out.contains("@_all");
        (out.replace("@_all", "@all"), everyone)
    }
}

/// The readable text of a message and whether it mentions everyone (a file's placeholder, for a
/// message that is a file); `None` for kinds baton does not read.
fn read_content(message_type: &str, content: &str, mentions: &Mentions) -> Option<(String, bool)> {
    let content: Value = serde_json::from_str(content).ok()?;
    match message_type {
        "text" => {
            let text = content.get("text").and_then(Value::as_str).unwrap_or("");
            Some(mentions.rewrite(text))
        }
        "post" => Some(post_text(&content, mentions)),
        _ => resources::placeholder(message_type, &content).map(|text| (text, false)),
    }
}

/// A rich-text (`post`) message as plain text: the title, then one line per paragraph. The body
/// is either `{title, content}` (as received) or keyed by language (as sent: `{"zh_cn": {...}}`).
fn post_text(content: &Value, mentions: &Mentions) -> (String, bool) {
    let body = resources::post_body(content);
    let mut everyone = false;
    let mut lines = Vec::new();
    if let Some(title) = body
        .get("title")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        lines.push(title.to_owned());
    }
    let paragraphs = body.get("content").and_then(Value::as_array);
    for paragraph in paragraphs.into_iter().flatten() {
        let mut line = String::new();
        for element in paragraph.as_array().into_iter().flatten() {
            let field = |key: &str| element.get(key).and_then(Value::as_str).unwrap_or("");
            match field("tag") {
                "text" | "md" | "code_block" => line.push_str(field("text")),
                "a" => {
                    let text = field("text");
                    line.push_str(if text.is_empty() { field("href") } else { text });
                }
                "at" => {
                    let id = field("user_id");
                    if id == "all" || id == "@_all" {
                        everyone = true;
                        line.push_str("@all");
                    } else {
                        let name = mentions
                            .names
                            .get(id)
                            .map(String::as_str)
                            .or(Some(field("user_name")).filter(|n| !n.is_empty()))
                            .unwrap_or(id);
                        line.push('@');
                        line.push_str(name);
                    }
                }
                "img" => line.push_str("[image]"),
                "media" => line.push_str("[video]"),
                "emotion" => line.push_str(&format!(":{}:", field("emoji_type"))),
                "hr" => line.push_str("---"),
                _ => {}
            }
        }
        lines.push(line);
    }
    let (text, all) = mentions.rewrite(&lines.join("\n"));
    (text, everyone || all || mentions.all)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BOT: &str = "ou_bot00000000000000000000000000001";

    fn fixture(name: &str) -> Value {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn normalize(open_id: &str, body: &Value) -> Result<InboundEvent, Skip> {
        normalize_with(open_id, &caid(), body)
    }

    fn normalize_with(
        open_id: &str,
        siblings: &Siblings,
        body: &Value,
    ) -> Result<InboundEvent, Skip> {
        let account = AccountId::from("echo");
        let posted = |id: &str| id == "om_posted_by_me";
        let me = Me {
            platform: Platform::Feishu,
            account: &account,
            app_id: "cli_9f5343c580712544",
            open_id,
            posted: &posted,
            siblings,
        };
        message_receive(&me, body)
    }

    /// A platform where the sibling baton bot Caid (app `cli_caid`) posted `om_by_caid`.
    fn caid() -> Siblings {
        let siblings = Siblings::new();
        siblings.add("Caid", "cli_caid", "ou_caid_self");
        siblings.posted("om_by_caid", "ou_caid_self");
        siblings
    }

    fn nobody() -> (AccountId, impl Fn(&str) -> bool, Siblings) {
        ("echo".into(), |_: &str| false, Siblings::new())
    }

    #[test]
    fn a_group_mention_resolves_to_the_bots_own_open_id() {
        let e = normalize(BOT, &fixture("event_im_message_receive_v1_group_at_bot")).unwrap();
        assert_eq!(e.platform, Platform::Feishu);
        assert_eq!(e.chat_kind, ChatKind::Group);
        assert_eq!(e.chat.as_str(), "oc_5ce6d572455d361153b7xx51da133945");
        assert_eq!(e.message_id.as_str(), "om_5ce6d572455d361153b7cb51da133945");
        assert_eq!(
            e.event_id.as_deref(),
            Some("5e3702a84e847582be8db7fb73283c02")
        );
        assert_eq!(e.text, "@EchoBot hello");
        assert_eq!(e.mentions, vec![UserId::from(BOT)]);
        assert!(!e.mentions_everyone);
        assert_eq!(e.sender.id.as_str(), "ou_84aad35d084aa403a838cf73ee18467");
        assert!(!e.sender.is_bot && !e.sender.is_self);
        assert_eq!(e.thread, None);
        assert_eq!(e.timestamp_ms, 1_609_073_151_345);
        assert_eq!(
            e.raw["header"]["event_id"],
            "5e3702a84e847582be8db7fb73283c02"
        );
        assert!(
            !e.raw
                .to_string()
                .contains("rvaYgkR0Q4k9xVn3jAbwod2xKb0ZNcwE"),
            "the verification token never reaches the transcript"
        );
    }

    #[test]
    fn a_p2p_message_is_a_dm() {
        let e = normalize(BOT, &fixture("event_im_message_receive_v1_p2p")).unwrap();
        assert_eq!(e.chat_kind, ChatKind::Dm);
        assert_eq!(e.text, "hello");
        assert!(e.mentions.is_empty());
    }

    #[test]
    fn a_reply_in_a_thread_keeps_both_mentions_in_order_and_its_thread() {
        let body = fixture("event_im_message_receive_v1_group_reply_two_mentions");
        let e = normalize(BOT, &body).unwrap();
        assert_eq!(e.text, "@EchoBot ask @Alice please");
        assert_eq!(
            e.leading_mentions, 1,
            "for EchoBot; Alice is named, not addressed"
        );
        assert_eq!(
            e.mentions,
            vec![
                UserId::from(BOT),
                UserId::from("ou_alice0000000000000000000000000002")
            ]
        );
        assert_eq!(e.thread, Some(ThreadId::from("omt_d4be107c616")));
        assert_eq!(
            e.reply_to,
            Some(MessageId::from("om_5ce6d572455d361153b7cb51da133945"))
        );
        assert_eq!(e.reply_to_author, None, "the parent is not ours");
        let mut chain = body.clone();
        chain["event"]["message"]
            .as_object_mut()
            .unwrap()
            .remove("thread_id");
        chain["event"]["message"]["parent_id"] = "om_posted_by_me".into();
        let e = normalize(BOT, &chain).unwrap();
        assert_eq!(
            e.thread,
            Some(ThreadId::from("om_5ce6d572455d361153b7cb51da133945")),
            "a reply chain outside a topic is keyed by its root"
        );
        assert_eq!(e.reply_to_author, Some(UserId::from(BOT)));
    }

    #[test]
    fn another_apps_view_of_the_same_message_names_a_different_open_id() {
        // App B receives `@BotA @BotB`: BotA has another open_id in B's namespace.
        let mut body = fixture("event_im_message_receive_v1_group_reply_two_mentions");
        body["event"]["message"]["mentions"][0]["id"]["open_id"] = "ou_botA_as_seen_by_B".into();
        body["event"]["message"]["mentions"][1]["id"]["open_id"] = "ou_botB_self".into();
        let e = normalize("ou_botB_self", &body).unwrap();
        assert!(e.mentions.contains(&UserId::from("ou_botB_self")));
        assert!(!e.mentions.contains(&UserId::from(BOT)));
    }

    #[test]
    fn a_sibling_bot_is_reported_by_its_own_open_id_but_never_as_me() {
        // Snark's app sees Caid as `ou_caid_in_snark`; the gateway knows Caid as `ou_caid_self`.
        let mut body = fixture("event_im_message_receive_v1_group_reply_two_mentions");
        body["event"]["message"]["mentions"][1]["id"]["open_id"] = "ou_caid_in_snark".into();
        body["event"]["message"]["mentions"][1]["name"] = "Caid".into();
        let e = normalize(BOT, &body).unwrap();
        assert_eq!(
            e.mentions,
            vec![UserId::from(BOT), UserId::from("ou_caid_self")]
        );
        assert_eq!(e.text, "@EchoBot ask @Caid please");
        // Caid's own account never turns a mention of someone named "Caid" into itself.
        let e = normalize("ou_caid_self", &body).unwrap();
        assert!(e.mentions.contains(&UserId::from("ou_caid_in_snark")));
        assert!(!e.mentions.contains(&UserId::from("ou_caid_self")));
    }

    #[test]
    fn another_apps_message_maps_to_the_sibling_that_posted_it() {
        // Caid's post @mentioning this bot, delivered with the include_bot scope: Caid's id here
        // is this app's view of it, which the gateway does not know.
        let mut body = fixture("event_im_message_receive_v1_group_at_bot");
        body["event"]["sender"] = json!({
            "sender_id": {"open_id": "ou_caid_in_this_app", "union_id": "on_x", "user_id": ""},
            "sender_type": "app",
            "tenant_key": "t",
        });
        body["event"]["message"]["message_id"] = "om_by_caid".into();
        let e = normalize(BOT, &body).unwrap();
        assert_eq!(
            e.sender.id.as_str(),
            "ou_caid_self",
            "baton posted it: it is Caid"
        );
        assert!(e.sender.is_bot && !e.sender.is_self);
        assert_eq!(e.mentions, vec![UserId::from(BOT)]);

        // A message Caid posted that this process does not remember: known by its app id.
        body["event"]["message"]["message_id"] = "om_older".into();
        body["event"]["sender"]["sender_id"]["app_id"] = "cli_caid".into();
        let e = normalize(BOT, &body).unwrap();
        assert_eq!(e.sender.id.as_str(), "ou_caid_self");

        // Not remembered, no app id, but this app saw Caid under that id in a mention.
        body["event"]["sender"]["sender_id"]
            .as_object_mut()
            .unwrap()
            .remove("app_id");
        let mut mention = fixture("event_im_message_receive_v1_group_reply_two_mentions");
        mention["event"]["message"]["mentions"][1]["id"]["open_id"] = "ou_caid_in_this_app".into();
        mention["event"]["message"]["mentions"][1]["name"] = "Caid".into();
        let siblings = caid();
        let e = normalize_with(BOT, &siblings, &body).unwrap();
        assert_eq!(
            e.sender.id.as_str(),
            "ou_caid_in_this_app",
            "not learned yet"
        );
        normalize_with(BOT, &siblings, &mention).unwrap();
        let e = normalize_with(BOT, &siblings, &body).unwrap();
        assert_eq!(
            e.sender.id.as_str(),
            "ou_caid_self",
            "learned from the mention"
        );

        // Any other app keeps the id the event gives, and is a bot.
        body["event"]["sender"]["sender_id"]["app_id"] = "cli_stranger".into();
        body["event"]["sender"]["sender_id"]["app_id"] = "cli_stranger".into();
        let e = normalize(BOT, &body).unwrap();
        assert_eq!(e.sender.id.as_str(), "ou_caid_in_this_app");
        assert!(e.sender.is_bot);

        // This bot's own post, delivered back to it, is its own.
        let e = normalize("ou_caid_self", &{
            let mut own = body.clone();
            own["event"]["message"]["message_id"] = "om_by_caid".into();
            own
        })
        .unwrap();
        assert!(e.sender.is_self);
    }

    #[test]
    fn at_all_sets_mentions_everyone_and_reads_as_at_all() {
        let mut body = fixture("event_im_message_receive_v1_group_at_bot");
        body["event"]["message"]["content"] = json!({"text": "@_all standup!"}).to_string().into();
        body["event"]["message"]["mentions"] =
            json!([{ "key": "@_all", "id": {}, "name": "所有人", "tenant_key": "t" }]);
        let e = normalize(BOT, &body).unwrap();
        assert!(e.mentions_everyone);
        assert!(e.mentions.is_empty());
        assert_eq!(e.text, "@all standup!");
    }

    #[test]
    fn placeholders_past_nine_are_not_confused() {
        let names = (1..=10)
            .map(|n| json!({"key": format!("@_user_{n}"), "id": {"open_id": format!("ou_{n}")}, "name": format!("U{n}")}))
            .collect::<Vec<_>>();
        let message = json!({ "mentions": names });
        let (account, posted, sibling) = nobody();
        let me = Me {
            platform: Platform::Feishu,
            account: &account,
            app_id: "cli_x",
            open_id: BOT,
            posted: &posted,
            siblings: &sibling,
        };
        let (text, all) = Mentions::of(&message, &me).rewrite("@_user_10 and @_user_1");
        assert_eq!(text, "@U10 and @U1");
        assert!(!all);
    }

    #[test]
    fn a_post_reads_as_text_with_its_mentions() {
        let mut body = fixture("event_im_message_receive_v1_group_at_bot");
        body["event"]["message"]["message_type"] = "post".into();
        body["event"]["message"]["content"] = json!({
            "title": "Plan",
            "content": [
                [{"tag": "at", "user_id": "@_user_1", "user_name": "EchoBot"},
                 {"tag": "text", "text": " please read "},
                 {"tag": "a", "text": "the doc", "href": "https://example.com"}],
                [{"tag": "img", "image_key": "img_1"}, {"tag": "text", "text": "thanks"}]
            ]
        })
        .to_string()
        .into();
        let e = normalize(BOT, &body).unwrap();
        assert_eq!(e.text, "Plan\n@EchoBot please read the doc\n[image]thanks");
        assert_eq!(e.mentions, vec![UserId::from(BOT)]);
        let sent_shape =
            json!({"zh_cn": {"title": "", "content": [[{"tag": "at", "user_id": "all"}]]}});
        let (account, posted, sibling) = nobody();
        let me = Me {
            platform: Platform::Feishu,
            account: &account,
            app_id: "cli_x",
            open_id: BOT,
            posted: &posted,
            siblings: &sibling,
        };
        let (text, all) = post_text(&sent_shape, &Mentions::of(&json!({}), &me));
        assert_eq!(text, "@all");
        assert!(all);
    }

    #[test]
    fn other_events_and_kinds_are_skipped() {
        let mut body = fixture("event_im_message_receive_v1_p2p");
        body["event"]["message"]["message_type"] = "sticker".into();
        body["event"]["message"]["content"] = json!({"file_key": "v2_1"}).to_string().into();
        assert_eq!(
            normalize(BOT, &body).unwrap_err(),
            Skip::Unsupported("sticker".into())
        );
        let mut image = fixture("event_im_message_receive_v1_p2p");
        image["event"]["message"]["message_type"] = "image".into();
        image["event"]["message"]["content"] = json!({"image_key": "img_1"}).to_string().into();
        let event = normalize(BOT, &image).unwrap();
        assert_eq!(event.text, "[image]");
        let source = format!("{}/img_1?type=image", event.message_id);
        assert_eq!(event.files[0].source.0, source);
        let mut other = fixture("event_im_message_receive_v1_p2p");
        other["header"]["event_type"] = "im.message.reaction.created_v1".into();
        assert!(matches!(normalize(BOT, &other), Err(Skip::NotAMessage(_))));
        let mut foreign = fixture("event_im_message_receive_v1_p2p");
        foreign["header"]["app_id"] = "cli_someone_else".into();
        assert_eq!(
            normalize(BOT, &foreign).unwrap_err(),
            Skip::OtherApp("cli_someone_else".into())
        );
    }
}
