//! Another baton bot's post as this account reads it: the gateway hands each baton bot's post
//! to the others itself (Telegram delivers bot posts to bots only in bot-to-bot mode), and the
//! copy Telegram delivers too carries the same chat and message id, so the two are one event.

use baton_contract::{SiblingPost, UserId};

use crate::directory::Directory;

/// Read `text` as a post: `@username`s of this bot and of baton's other bots are mentions.
pub(crate) fn read(text: &str, me: (i64, &str), directory: &Directory) -> SiblingPost {
    let mut post = SiblingPost::plain(text);
    for word in text.split(|c: char| c.is_whitespace() || c == ',' || c == ':') {
        let Some(name) = word.strip_prefix('@') else {
            continue;
        };
        let name = name.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        let id = if name.eq_ignore_ascii_case(me.1) {
            Some(me.0)
        } else {
            directory.id_of(name)
        };
        if let Some(id) = id {
            post.mentions.push(UserId(id.to_string()));
        }
    }
    post
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_of_baton_bots_are_mentions() {
        let directory = Directory::new();
        directory.add("caid_bot", 2);
        let post = read(
            "@Snark_bot, ask @caid_bot. @stranger?",
            (1, "snark_bot"),
            &directory,
        );
        assert_eq!(post.mentions, [UserId::from("1"), UserId::from("2")]);
    }
}
