//! What a heartbeat asks the bot, and when a checklist asks nothing.
//!
//! A `HEARTBEAT.md` is a checklist people (or the bot) edit: it is read afresh at every
//! heartbeat. One that holds only headings and empty checkboxes (a template nobody filled in)
//! asks for nothing, so the heartbeat is skipped (`empty`) instead of paying for a model turn.

use crate::outcome::HEARTBEAT_OK;

/// The opening of every heartbeat prompt: it is not a message from anyone.
const OPENING: &str = "This is a heartbeat: a scheduled check-in, not a message from anyone.";

/// The prompt when the bot has no `prompt_file`.
pub fn builtin_heartbeat_prompt() -> String {
    format!(
        "{OPENING} Look at whether anything needs your attention now: a question nobody \
         answered, work you said you would follow up on. If something does, say what it is or \
         do it. If nothing needs attention, answer exactly {HEARTBEAT_OK}."
    )
}

/// The prompt around the bot's checklist file.
pub(super) fn checklist_prompt(checklist: &str) -> String {
    format!(
        "{OPENING} Go through your checklist:\n\n{}\n\nIf nothing on it needs attention now, \
         answer exactly {HEARTBEAT_OK}.",
        checklist.trim()
    )
}

/// Whether a checklist asks for nothing: every line is blank, a Markdown heading, an HTML
/// comment, or a list item with nothing in it but an optional empty checkbox (`- [ ]`).
///
/// ```
/// use baton::schedule::is_effectively_empty;
/// assert!(is_effectively_empty("# Heartbeat\n\n- [ ]\n* [ ] \n"));
/// assert!(!is_effectively_empty("# Heartbeat\n- [ ] check the deploy channel\n"));
/// ```
pub fn is_effectively_empty(text: &str) -> bool {
    let mut in_comment = false;
    text.lines().all(|line| {
        let line = line.trim();
        if in_comment {
            in_comment = !line.contains("-->");
            return true;
        }
        if line.starts_with("<!--") {
            in_comment = !line.contains("-->");
            return true;
        }
        line.is_empty() || line.starts_with('#') || is_empty_item(line)
    })
}

/// `-`, `*`, `+` or `1.`, then at most an unticked or ticked box, then nothing.
fn is_empty_item(line: &str) -> bool {
    let rest = if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        match line[digits..].strip_prefix(['.', ')']) {
            Some(rest) if digits > 0 => rest,
            _ => return false,
        }
    };
    let rest = rest.trim();
    let rest = ["[ ]", "[x]", "[X]", "[]"]
        .iter()
        .find_map(|b| rest.strip_prefix(b))
        .unwrap_or(rest);
    rest.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_empty() {
        assert!(is_effectively_empty(""));
        assert!(is_effectively_empty("   \n\n"));
        assert!(is_effectively_empty("# Heartbeat\n## Daily\n"));
        assert!(is_effectively_empty(
            "# Todo\n- [ ]\n- [x]\n* []\n+\n1.\n2) [ ]\n"
        ));
        assert!(is_effectively_empty(
            "<!-- put checks here\n   one per line -->\n# Checks\n"
        ));
    }

    #[test]
    fn any_real_line_is_not() {
        assert!(!is_effectively_empty(
            "# Todo\n- [ ] ping @ana about the release\n"
        ));
        assert!(!is_effectively_empty("Check the deploy channel."));
        assert!(!is_effectively_empty("1. look at CI"));
        assert!(!is_effectively_empty("-- not a list item"));
        assert!(!is_effectively_empty("#\n<!-- x -->\nreal\n"));
    }

    #[test]
    fn prompts_name_the_token() {
        assert!(builtin_heartbeat_prompt().contains("heartbeat"));
        assert!(builtin_heartbeat_prompt().ends_with("answer exactly HEARTBEAT_OK."));
        let p = checklist_prompt("\n- [ ] look at CI\n");
        assert!(p.contains("\n\n- [ ] look at CI\n\n"), "{p}");
        assert!(p.contains(HEARTBEAT_OK));
    }
}
