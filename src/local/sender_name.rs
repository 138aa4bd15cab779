//! Who a local sender may say they are. Names in local rooms are self-declared (the API gate is
//! the only check on who posts), so a name must at least not pass for someone else's: not for a
//! configured admin's, not for a bot's, not for the gateway's own, and not by hiding characters
//! a reader cannot see.
//!
//! A name is refused, with the reason, when it
//! - is empty, over [`MAX_SENDER_CHARS`], or holds a control, bidi or invisible character
//!   (zero-width, format characters, any space but the plain one);
//! - has spaces at its edges;
//! - is `baton`, starts with `bot:`, or is a bot's id or display name, in any case;
//! - looks like a configured local admin's name without being exactly it: the same after NFKC,
//!   case folding and folding the usual confusables (Cyrillic and Greek letters that look
//!   Latin, `0` for `o`, `1`/`I`/`|` for `l`).

use unicode_normalization::UnicodeNormalization;

use crate::display_name::is_spoofing;

/// Longest sender name a room takes, in characters.
pub const MAX_SENDER_CHARS: usize = 64;

/// Why a sender name was refused; each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameRefused {
    /// Empty or too long.
    #[error("the sender name must be 1 to {MAX_SENDER_CHARS} characters; pick a plain name")]
    Length,
    /// A character a reader cannot see, or that reorders or forges text.
    #[error(
        "the sender name holds an invisible, control or text-direction character (U+{0:04X}); \
         pick a plain name"
    )]
    Hidden(u32),
    /// Spaces before or after it.
    #[error("the sender name has spaces at its edges; remove them")]
    EdgeSpaces,
    /// The gateway's own name, a bot's, or the `bot:` prefix.
    #[error("the sender name `{0}` belongs to the gateway or a bot; pick another")]
    Reserved(String),
    /// A look-alike of an admin's name.
    #[error("the sender name looks like the admin `{0}` without being it; pick another")]
    LooksLikeAdmin(String),
}

/// The names a hub refuses senders: bots' and admins'.
#[derive(Debug, Clone, Default)]
pub struct NameRules {
    /// Bot ids and display names, folded (NFKC, lower case).
    reserved: Vec<String>,
    /// Local admins' names, with their skeletons.
    admins: Vec<(String, String)>,
}

impl NameRules {
    /// Rules reserving `bots`' ids and display names and guarding `admins`' names.
    pub fn new<'a>(
        bots: impl IntoIterator<Item = &'a str>,
        admins: impl IntoIterator<Item = &'a str>,
    ) -> NameRules {
        NameRules {
            reserved: bots.into_iter().map(fold).collect(),
            admins: admins
                .into_iter()
                .map(|a| (a.to_owned(), skeleton(a)))
                .collect(),
        }
    }

    /// Whether `name` may speak in a room (see the module doc).
    pub fn check(&self, name: &str) -> Result<(), NameRefused> {
        let chars = name.chars().count();
        if name.trim().is_empty() || chars > MAX_SENDER_CHARS {
            return Err(NameRefused::Length);
        }
        if let Some(c) = name.chars().find(|&c| is_hidden(c)) {
            return Err(NameRefused::Hidden(c as u32));
        }
        if name.trim() != name {
            return Err(NameRefused::EdgeSpaces);
        }
        let folded = fold(name);
        if folded == "baton" || folded.starts_with("bot:") || self.reserved.contains(&folded) {
            return Err(NameRefused::Reserved(name.to_owned()));
        }
        let shape = skeleton(name);
        if let Some((admin, _)) = self
            .admins
            .iter()
            .find(|(admin, skel)| *skel == shape && admin != name)
        {
            return Err(NameRefused::LooksLikeAdmin(admin.clone()));
        }
        Ok(())
    }
}

/// A character that hides, reorders or forges: controls and bidi marks ([`is_spoofing`]),
/// zero-width and other format characters, and every space but U+0020.
fn is_hidden(c: char) -> bool {
    is_spoofing(c)
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200D}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// NFKC, then lower case.
fn fold(name: &str) -> String {
    name.nfkc().flat_map(char::to_lowercase).collect()
}

/// What `name` looks like: [`fold`]ed, with confusables folded to the Latin letter they pass
/// for.
fn skeleton(name: &str) -> String {
    fold(name).chars().map(confusable).collect()
}

/// The Latin letter `c` (already lower case) passes for, or `c`.
fn confusable(c: char) -> char {
    match c {
        'а' | 'α' => 'a',
        'в' | 'β' => 'b',
        'с' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'ё' | 'є' | 'ε' => 'e',
        'ɡ' => 'g',
        'һ' | 'н' => 'h',
        // `I` folds to `i`, which passes for `l` in most fonts: all of them fold to `l`.
        'i' | 'і' | 'ї' | 'ι' | 'ı' => 'l',
        'ј' => 'j',
        'к' | 'κ' => 'k',
        '1' | '|' | 'ӏ' | 'ǀ' => 'l',
        'м' => 'm',
        'п' | 'η' => 'n',
        '0' | 'о' | 'ο' | 'ө' => 'o',
        'р' | 'ρ' => 'p',
        'ԛ' => 'q',
        'ѕ' => 's',
        'т' | 'τ' => 't',
        'υ' | 'ս' => 'u',
        'ν' | 'ѵ' => 'v',
        'ԝ' | 'ѡ' | 'ω' => 'w',
        'х' | 'χ' => 'x',
        'у' | 'γ' => 'y',
        'ᴢ' => 'z',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> NameRules {
        NameRules::new(["snark", "Snark the Reviewer"], ["admin", "Zoë"])
    }

    #[test]
    fn plain_names_and_the_admins_own_pass() {
        for name in ["alice", "Zoë Wang", "admin", "Zoë", "bob-2", "李雷"] {
            assert_eq!(rules().check(name), Ok(()), "{name:?}");
        }
    }

    #[test]
    fn invisible_characters_and_edge_spaces_are_refused() {
        for name in [
            "ad\u{200B}min",
            "alice\u{00A0}smith",
            "bob\u{FEFF}",
            "eve\u{202E}nimda",
            "a\u{2060}b",
            "x\0y",
        ] {
            assert!(
                matches!(rules().check(name), Err(NameRefused::Hidden(_))),
                "{name:?}"
            );
        }
        for name in [" alice", "alice ", " alice "] {
            assert_eq!(
                rules().check(name),
                Err(NameRefused::EdgeSpaces),
                "{name:?}"
            );
        }
        assert_eq!(rules().check(""), Err(NameRefused::Length));
        assert_eq!(rules().check(&"x".repeat(65)), Err(NameRefused::Length));
    }

    #[test]
    fn look_alikes_of_an_admin_are_refused() {
        // Cyrillic а and о, a capital I for l, a zero, full-width letters, another case.
        for name in [
            "аdmin",
            "admіn",
            "ADMIN",
            "Admin",
            "adm1n",
            "ａｄｍｉｎ",
            "zoë",
            "ZOË",
        ] {
            assert!(
                matches!(rules().check(name), Err(NameRefused::LooksLikeAdmin(_))),
                "{name:?}"
            );
        }
    }

    #[test]
    fn the_gateways_and_bots_names_are_reserved_in_any_case() {
        for name in [
            "baton",
            "Baton",
            "bot:snark",
            "BOT:x",
            "snark",
            "SNARK",
            "snark the reviewer",
        ] {
            assert!(
                matches!(rules().check(name), Err(NameRefused::Reserved(_))),
                "{name:?}"
            );
        }
    }
}
