//! Slack payloads to the contract's [`InboundEvent`] (pipeline step 1).
//!
//! Works on the raw JSON rather than typed models: Slack adds fields and subtypes freely, and an
//! unknown shape must be ignored, never fail the connection. The same function serves Socket Mode
//! (the envelope's `payload`) and the Events API (the request body), which carry identical bodies.
//!
//! Dedupe goes by the message id `<channel>:<ts>`: a redelivery repeats it, and the `app_mention`
//! and `message` events for one message share it, so the pipeline's durable dedupe sees the pair
//! as one event. The `event_id` is kept in the event too, though nothing in the gateway reads it.

use baton_contract::{
    AccountId, ChatId, ChatKind, CommandReply, FileRef, InboundEvent, InboundFile, InboundKind,
    MessageId, Platform, Sender, ThreadId, UserId, leading_mentions,
};
use serde_json::Value;

/// Who this account is on Slack, from `auth.test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The bot user's id (`U…`): mentions of the bot carry it, and its posts are authored by it.
    pub user_id: String,
    /// The bot's id (`B…`): set on everything the app posts.
    pub bot_id: Option<String>,
    /// The workspace's id (`T…`): a stream to a channel names the asker's team.
    pub team_id: String,
}

/// Why a payload produced no event. Each is normal traffic, logged at debug level only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// Not an `event_callback` carrying a `message` or `app_mention`.
    NotAMessage,
    /// An edit, deletion, join notice or other subtype that is not something said.
    Subtype(String),
    /// The event belongs to another Slack app (`api_app_id` differs from this account's).
    OtherApp(String),
    /// A required field (channel, ts) is absent.
    Malformed(&'static str),
}

/// The message id baton uses for a Slack message: channel and `ts` (a `ts` is unique only within
/// its channel).
pub fn message_id(channel: &str, ts: &str) -> MessageId {
    MessageId(format!("{channel}:{ts}"))
}

/// The `ts` part of a baton message id made by [`message_id`].
pub fn ts_of(message_id: &MessageId) -> Option<&str> {
    message_id.as_str().rsplit_once(':').map(|(_, ts)| ts)
}

/// Check `api_app_id` against the account's app. With no app configured, the first app seen is
/// learned (an app-level token and a signed request already prove the sender), and every later
/// event must match it.
pub fn check_app(expected: &mut Option<String>, body: &Value) -> Result<(), Skip> {
    let Some(app) = body.get("api_app_id").and_then(Value::as_str) else {
        return Ok(());
    };
    match expected {
        Some(mine) if mine != app => Err(Skip::OtherApp(app.to_owned())),
        Some(_) => Ok(()),
        None => {
            *expected = Some(app.to_owned());
            Ok(())
        }
    }
}

/// Normalize an Events API body (`type: event_callback`).
pub fn event_callback(
    account: &AccountId,
    me: &Identity,
    body: &Value,
) -> Result<InboundEvent, Skip> {
    if body.get("type").and_then(Value::as_str) != Some("event_callback") {
        return Err(Skip::NotAMessage);
    }
    let event = body.get("event").ok_or(Skip::NotAMessage)?;
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "message" && kind != "app_mention" {
        return Err(Skip::NotAMessage);
    }
    if let Some(subtype) = event.get("subtype").and_then(Value::as_str)
        && !matches!(
            subtype,
            "bot_message" | "thread_broadcast" | "file_share" | "me_message"
        )
    {
        return Err(Skip::Subtype(subtype.to_owned()));
    }
    let str_of = |key: &str| event.get(key).and_then(Value::as_str);
    let channel = str_of("channel").ok_or(Skip::Malformed("channel"))?;
    let ts = str_of("ts").ok_or(Skip::Malformed("ts"))?;
    let bot_id = str_of("bot_id");
    let user = str_of("user");
    // A baton bot's post carries its bot user (`user`) as well as `bot_id`: prefer the user id,
    // which is what the gateway knows each account by. Classic bots have only `bot_id`.
    let author = user.or(bot_id).ok_or(Skip::Malformed("user"))?;
    let is_bot = bot_id.is_some() || str_of("subtype") == Some("bot_message");
    let is_self =
        user == Some(me.user_id.as_str()) || (bot_id.is_some() && bot_id == me.bot_id.as_deref());
    let name = event
        .pointer("/bot_profile/name")
        .and_then(Value::as_str)
        .or(str_of("username"))
        .unwrap_or("")
        .to_owned();
    let raw_text = str_of("text").unwrap_or("");
    let (text, mentions, mentions_everyone) = mentions(raw_text);
    let thread = str_of("thread_ts")
        .filter(|t| *t != ts)
        .map(|t| ThreadId(t.to_owned()));
    let sender = Sender {
        id: UserId(author.to_owned()),
        name,
        is_bot,
        is_self,
    };
    let mut out = InboundEvent::text_message(
        Platform::Slack,
        account.clone(),
        ChatId(channel.to_owned()),
        chat_kind(str_of("channel_type"), channel),
        sender,
        message_id(channel, ts),
        text,
    );
    out.event_id = body
        .get("event_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    out.reply_to_author = thread
        .as_ref()
        .and(str_of("parent_user_id"))
        .map(UserId::from);
    out.thread = thread;
    out.mentions = mentions;
    out.leading_mentions = leading_mentions(raw_text, user_mention);
    out.mentions_everyone = mentions_everyone;
    out.timestamp_ms = ts_millis(ts);
    out.files = files(event);
    out.raw = body.clone();
    Ok(out)
}

/// The message's `files` (a `file_share`, or files posted with a mention). A file Slack shows
/// without content (`tombstone`, `hidden_by_limit`, an external link) keeps an empty source:
/// the download then says why it was not read, so the bot is told rather than left unaware.
fn files(event: &Value) -> Vec<InboundFile> {
    let entries = event.get("files").and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .map(|file| {
            let str_of = |key: &str| {
                file.get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            let hosted = !matches!(
                str_of("mode"),
                Some("tombstone" | "hidden_by_limit" | "external")
            );
            let url = str_of("url_private_download")
                .or(str_of("url_private"))
                .filter(|_| hosted);
            InboundFile {
                name: str_of("name")
                    .or(str_of("title"))
                    .or(str_of("id"))
                    .unwrap_or("file")
                    .to_owned(),
                media_type: str_of("mimetype").map(str::to_owned),
                size: file.get("size").and_then(Value::as_u64),
                source: FileRef(url.unwrap_or("").to_owned()),
            }
        })
        .collect()
}

/// Normalize a slash command (Socket Mode `payload`, or the HTTP form as a JSON object).
/// `text` is what followed the command name, as the contract's `Command` kind expects.
pub fn slash_command(account: &AccountId, fields: &Value) -> Result<InboundEvent, Skip> {
    let str_of = |key: &str| fields.get(key).and_then(Value::as_str);
    let channel = str_of("channel_id").ok_or(Skip::Malformed("channel_id"))?;
    let user = str_of("user_id").ok_or(Skip::Malformed("user_id"))?;
    let response_url = str_of("response_url").ok_or(Skip::Malformed("response_url"))?;
    let trigger = str_of("trigger_id").ok_or(Skip::Malformed("trigger_id"))?;
    let sender = Sender {
        id: UserId(user.to_owned()),
        name: str_of("user_name").unwrap_or("").to_owned(),
        is_bot: false,
        is_self: false,
    };
    let mut out = InboundEvent::text_message(
        Platform::Slack,
        account.clone(),
        ChatId(channel.to_owned()),
        chat_kind(None, channel),
        sender,
        // A command is not a message; its trigger id is unique per invocation.
        MessageId(format!("cmd:{trigger}")),
        str_of("text").unwrap_or("").trim(),
    );
    out.kind = InboundKind::Command {
        reply: CommandReply {
            token: response_url.to_owned(),
        },
    };
    out.timestamp_ms = now_ms();
    // The raw form holds the response_url, a bearer-like capability: keep it out of transcripts.
    out.raw = Value::Null;
    Ok(out)
}

/// Slack `channel_type` (or, when absent as on `app_mention`, the channel id's prefix) to a kind.
fn chat_kind(channel_type: Option<&str>, channel: &str) -> ChatKind {
    match channel_type {
        Some("im") => ChatKind::Dm,
        Some(_) => ChatKind::Group,
        None if channel.starts_with('D') => ChatKind::Dm,
        None => ChatKind::Group,
    }
}

/// A `<@U…>` / `<@U…|name>` mention at the start of `text`: the user id and the token's length.
fn user_mention(text: &str) -> Option<(String, usize)> {
    let inner = text.strip_prefix("<@")?;
    let end = inner.find('>')?;
    let id = inner[..end].split('|').next()?;
    (!id.is_empty()).then(|| (id.to_owned(), end + 3))
}

/// Pull `<@U…>` / `<@U…|name>` mentions out of `text`, rewriting each to `@U…`, and note
/// `<!here>`, `<!channel>` and `<!everyone>`.
fn mentions(text: &str) -> (String, Vec<UserId>, bool) {
    let mut out = String::with_capacity(text.len());
    let mut ids = Vec::new();
    let mut everyone = false;
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('>') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        let (target, label) = inner.split_once('|').unwrap_or((inner, ""));
        if let Some(id) = target.strip_prefix('@') {
            ids.push(UserId(id.to_owned()));
            out.push('@');
            out.push_str(if label.is_empty() { id } else { label });
        } else if let Some(special) = target.strip_prefix('!') {
            let special = special.split('^').next().unwrap_or("");
            if matches!(special, "here" | "channel" | "everyone") {
                everyone = true;
            }
            out.push('@');
            out.push_str(special);
        } else {
            out.push('<');
            out.push_str(inner);
            out.push('>');
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    (out, ids, everyone)
}

fn ts_millis(ts: &str) -> i64 {
    ts.parse::<f64>().map(|s| (s * 1000.0) as i64).unwrap_or(0)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn me() -> Identity {
        Identity {
            user_id: "W111".into(),
            bot_id: Some("B111".into()),
            team_id: "T111".into(),
        }
    }

    fn account() -> AccountId {
        "snark".into()
    }

    #[test]
    fn app_mention_resolves_the_mention_and_keys_by_channel_and_ts() {
        let e = event_callback(&account(), &me(), &fixture("events_app_mention")).unwrap();
        assert_eq!(e.mentions, vec![UserId::from("W111")]);
        assert_eq!(e.text, "@W111 Hi there!");
        assert_eq!(e.message_id.as_str(), "C111:1595926230.009600");
        assert_eq!(e.event_id.as_deref(), Some("Ev111"));
        assert_eq!(e.chat_kind, ChatKind::Group);
        assert_eq!(e.thread, None);
        assert!(!e.sender.is_bot && !e.sender.is_self);
        assert_eq!(e.timestamp_ms, 1_595_926_230_009);
    }

    #[test]
    fn the_mention_and_message_pair_share_a_message_id() {
        let body = fixture("socket_mode_events_api_app_mention")["payload"].clone();
        let mention = event_callback(&account(), &me(), &body).unwrap();
        let mut message_body = body.clone();
        message_body["event"]["type"] = "message".into();
        message_body["event"]["channel_type"] = "channel".into();
        message_body["event_id"] = "Ev222".into();
        let message = event_callback(&account(), &me(), &message_body).unwrap();
        assert_eq!(mention.message_id, message.message_id);
        assert_ne!(mention.event_id, message.event_id);
    }

    #[test]
    fn dm_and_thread_are_recognised() {
        let dm = event_callback(&account(), &me(), &fixture("events_message_im_docs")).unwrap();
        assert_eq!(dm.chat_kind, ChatKind::Dm);
        let reply = fixture("events_message_thread_reply_channel");
        let t = event_callback(&account(), &me(), &reply).unwrap();
        assert_eq!(t.thread, Some(ThreadId::from("1726133698.626339")));
        assert_eq!(t.reply_to_author, Some(UserId::from("W222")));
        assert_eq!(t.chat_kind, ChatKind::Group);
    }

    #[test]
    fn bot_authors_with_and_without_subtype() {
        let modern = fixture("events_message_bot_id_no_subtype");
        let e = event_callback(&account(), &me(), &modern).unwrap();
        assert!(e.sender.is_bot && !e.sender.is_self);
        assert_eq!(e.sender.id.as_str(), "UB111");
        assert_eq!(e.sender.name, "other-app");
        let classic = fixture("events_message_subtype_bot_message");
        let e = event_callback(&account(), &me(), &classic).unwrap();
        assert!(e.sender.is_bot);
        assert_eq!(e.sender.id.as_str(), "B888");
        let mine = Identity {
            user_id: "UB111".into(),
            bot_id: Some("B999".into()),
            team_id: "T111".into(),
        };
        assert!(
            event_callback(&account(), &mine, &modern)
                .unwrap()
                .sender
                .is_self
        );
    }

    #[test]
    fn edits_and_other_events_are_skipped() {
        let changed = fixture("events_message_changed");
        assert_eq!(
            event_callback(&account(), &me(), &changed).unwrap_err(),
            Skip::Subtype("message_changed".into())
        );
        let hello = fixture("events_url_verification");
        assert_eq!(
            event_callback(&account(), &me(), &hello).unwrap_err(),
            Skip::NotAMessage
        );
    }

    #[test]
    fn another_apps_events_are_refused_after_the_first_is_learned() {
        let mut app = None;
        assert!(check_app(&mut app, &fixture("events_app_mention")).is_ok());
        assert_eq!(app.as_deref(), Some("A111"));
        let other = fixture("events_message_im_docs");
        assert_eq!(
            check_app(&mut app, &other).unwrap_err(),
            Skip::OtherApp("A0PNCHHK2".into())
        );
    }

    #[test]
    fn slash_command_becomes_a_private_command() {
        let payload = fixture("socket_mode_slash_commands")["payload"].clone();
        let e = slash_command(&account(), &payload).unwrap();
        assert_eq!(e.sender.id.as_str(), "U111");
        assert_eq!(e.message_id.as_str(), "cmd:111.222.xxx");
        match e.kind {
            InboundKind::Command { reply } => {
                assert_eq!(reply.token, "https://hooks.slack.com/commands/T111/111/xxx")
            }
            InboundKind::Message => panic!("expected a command"),
        }
    }

    #[test]
    fn leading_mentions_are_the_addressees() {
        let count = |text| leading_mentions(text, user_mention);
        assert_eq!(count("<@U1> ask <@U2>: write a haiku"), 1);
        assert_eq!(count("<@U1|snark> <@U2> hi"), 2);
        assert_eq!(count("ask <@U1> and <@U2>"), 0);
        assert_eq!(count("<!here> <@U1> hi"), 0);
    }

    #[test]
    fn everyone_mentions_and_labels() {
        let (text, ids, all) = mentions("<!here> ask <@U1|bob> about <https://x.y>");
        assert_eq!(text, "@here ask @bob about <https://x.y>");
        assert_eq!(ids, vec![UserId::from("U1")]);
        assert!(all);
        assert_eq!(ts_of(&message_id("C1", "1.2")), Some("1.2"));
    }

    /// A `file_share` message in the shape Slack documents for file objects: each hosted file
    /// becomes an inbound file fetched from `url_private_download`; a tombstone keeps no source.
    #[test]
    fn shared_files_are_described_for_download() {
        let mut body = fixture("events_message_channel_user");
        body["event"]["subtype"] = "file_share".into();
        body["event"]["files"] = serde_json::json!([
            {"id": "F1", "name": "shot.png", "title": "shot", "mimetype": "image/png",
             "filetype": "png", "size": 68, "mode": "hosted",
             "url_private": "https://files.slack.com/files-pri/T1-F1/shot.png",
             "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/shot.png"},
            {"id": "F2", "mode": "tombstone"}
        ]);
        let e = event_callback(&account(), &me(), &body).unwrap();
        assert_eq!(e.files.len(), 2, "{:?}", e.files);
        assert_eq!(e.files[0].name, "shot.png");
        assert_eq!(e.files[0].media_type.as_deref(), Some("image/png"));
        assert_eq!(e.files[0].size, Some(68));
        assert_eq!(
            e.files[0].source.0,
            "https://files.slack.com/files-pri/T1-F1/download/shot.png"
        );
        assert_eq!(
            (e.files[1].name.as_str(), e.files[1].source.0.as_str()),
            ("F2", "")
        );
    }
}
