//! The `@name` tokens of a local post: whom it mentions, and whom it addresses (the mentions
//! that open it), as a platform's structured mentions would say.

use baton_contract::UserId;

/// The `@name` tokens of a post.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Mentions {
    /// In order of appearance.
    pub(super) found: Vec<UserId>,
    /// How many of `found` open the text, before any other word (the addressees).
    pub(super) leading: usize,
    /// `@everyone`, `@here` or `@all` appears.
    pub(super) everyone: bool,
}

/// Read the `@name` tokens of `text`.
pub(super) fn mentions(text: &str) -> Mentions {
    let mut out = Mentions {
        found: Vec::new(),
        leading: 0,
        everyone: false,
    };
    let mut opening = true;
    for word in text.split(|c: char| c.is_whitespace() || c == ',' || c == ':') {
        if word.is_empty() {
            continue;
        }
        let Some(name) = word.strip_prefix('@') else {
            opening = false;
            continue;
        };
        let name = name.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'));
        match name {
            "" => opening = false,
            "everyone" | "here" | "all" => out.everyone = true,
            _ => {
                out.found.push(UserId(name.to_owned()));
                if opening {
                    out.leading += 1;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_structural_tokens() {
        let m = mentions("@snark, can you ask @caid: what about @here?");
        assert_eq!(m.found, vec![UserId::from("snark"), UserId::from("caid")]);
        assert_eq!(m.leading, 1, "snark is addressed, caid only named");
        assert!(m.everyone);
        assert_eq!(mentions("email me at a@b.c").found, Vec::<UserId>::new());
        assert_eq!(mentions(" @snark @caid: hi @sec").leading, 2);
        assert_eq!(mentions("can @caid help?").leading, 0);
    }
}
