//! Another baton bot's post, as this account would have received it.
//!
//! Feishu never delivers one app's message to another unless it @mentions it, so the gateway
//! hands baton bots' posts over itself, as the text baton sent. In a Feishu text message a
//! mention is `<at user_id="ID">Name</at>`, where `ID` is an `open_id` (as the posting app sees
//! the person) or `all`. `open_id`s are per app, so a bot cannot know the others' ids in its
//! own namespace; a mention of a baton bot therefore counts when it names the bot's own
//! `open_id`, its app id or its app's name. It is resolved like a mention the platform delivers
//! ([`crate::normalize`]): to this account's own `open_id` for itself, a sibling's own `open_id`
//! for a sibling, anyone else as written.

use baton_contract::{SiblingPost, UserId};

use crate::Siblings;

/// Who reads the post.
pub(crate) struct Reader<'a> {
    /// The account's own `open_id`.
    pub open_id: &'a str,
    /// Its app id.
    pub app_id: &'a str,
    /// Its app's name.
    pub app_name: &'a str,
    /// The other baton bots on the platform.
    pub siblings: &'a Siblings,
}

impl Reader<'_> {
    /// `text` with each `<at>` tag read as `@Name`, and its mentions resolved.
    pub(crate) fn read(&self, text: &str) -> SiblingPost {
        let mut post = SiblingPost::plain("");
        let mut rest = text;
        while let Some((before, tag, after)) = next_tag(rest) {
            post.text.push_str(before);
            if tag.id == "all" {
                post.mentions_everyone = true;
                post.text.push_str("@all");
            } else {
                post.text.push('@');
                post.text.push_str(if tag.name.is_empty() {
                    tag.id
                } else {
                    tag.name
                });
                post.mentions.push(self.resolve(&tag));
            }
            rest = after;
        }
        post.text.push_str(rest);
        post
    }

    fn resolve(&self, tag: &Tag<'_>) -> UserId {
        let is_me = tag.id == self.open_id
            || tag.id == self.app_id
            || (!tag.name.is_empty() && tag.name == self.app_name);
        if is_me {
            return UserId::from(self.open_id);
        }
        let sibling = self
            .siblings
            .open_id_of_app(tag.id)
            .or_else(|| self.siblings.open_id_of(tag.name));
        UserId(sibling.unwrap_or_else(|| tag.id.to_owned()))
    }
}

/// One `<at user_id="…">Name</at>`.
struct Tag<'a> {
    id: &'a str,
    name: &'a str,
}

/// The text before the next well-formed `<at>` tag, the tag, and the text after it.
fn next_tag(text: &str) -> Option<(&str, Tag<'_>, &str)> {
    let mut from = 0;
    loop {
        let start = from + text[from..].find("<at ")?;
        let open_end = start + text[start..].find('>')?;
        let close = open_end + text[open_end..].find("</at>")?;
        if let Some(id) = attribute(&text[start + 4..open_end], "user_id") {
            let tag = Tag {
                id,
                name: text[open_end + 1..close].trim(),
            };
            return Some((&text[..start], tag, &text[close + 5..]));
        }
        from = start + 4;
    }
}

/// The value of `name="…"` (or single-quoted) in a tag's attributes.
fn attribute<'a>(attributes: &'a str, name: &str) -> Option<&'a str> {
    let at = attributes.find(&format!("{name}="))? + name.len() + 1;
    let quoted = &attributes[at..];
    let quote = quoted.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &quoted[1..];
    let end = value.find(quote)?;
    Some(value[..end].trim()).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(siblings: &Siblings) -> Reader<'_> {
        Reader {
            open_id: "ou_caid_self",
            app_id: "cli_caid",
            app_name: "Caid",
            siblings,
        }
    }

    #[test]
    fn a_mention_of_this_bot_by_id_app_id_or_name_resolves_to_its_own_open_id() {
        let siblings = Siblings::new();
        siblings.add("Snark", "cli_snark", "ou_snark_self");
        let r = reader(&siblings);
        for id in ["ou_caid_self", "cli_caid", "ou_caid_as_seen_by_snark"] {
            let post = r.read(&format!("<at user_id=\"{id}\">Caid</at> please look"));
            assert_eq!(post.text, "@Caid please look");
            assert_eq!(post.mentions, vec![UserId::from("ou_caid_self")], "{id}");
        }
        let post = r.read("ask <at user_id='cli_snark'>S</at> and <at user_id=\"ou_h\">Hu</at>");
        assert_eq!(post.text, "ask @S and @Hu");
        assert_eq!(
            post.mentions,
            vec![UserId::from("ou_snark_self"), UserId::from("ou_h")]
        );
        assert!(!post.mentions_everyone);
    }

    #[test]
    fn at_all_and_malformed_tags() {
        let siblings = Siblings::new();
        let r = reader(&siblings);
        let post = r.read("<at user_id=\"all\">所有人</at> standup");
        assert_eq!(post.text, "@all standup");
        assert!(post.mentions_everyone && post.mentions.is_empty());
        let plain = "a <at nothing>x</at> and <at user_id=\"unclosed\">y";
        let post = r.read(plain);
        assert_eq!(post.text, plain);
        assert!(post.mentions.is_empty());
    }
}
