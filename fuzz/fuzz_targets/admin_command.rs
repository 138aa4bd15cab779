//! The `/baton ...` admin commands, from outside: any chat message (a text command may follow
//! leading @mentions) and the text of a native slash command, parsed by
//! `text_command` and `AdminCommand::parse`; and the chain emergency brake, which looks for
//! `/baton chain stop` anywhere in a message.
#![no_main]

use baton::admin::{AdminCommand, TRANSCRIPT_MAX_LINES, asks_chain_stop, text_command};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = asks_chain_stop(&text);
    check(&text);
    if let Some(line) = text_command(&text) {
        assert!(text.contains(line));
        check(line);
    }
});

/// Parse one command line and check what the parser promises about the result.
fn check(line: &str) {
    match AdminCommand::parse(line) {
        Ok(AdminCommand::Transcript { lines, .. }) => {
            assert!((1..=TRANSCRIPT_MAX_LINES).contains(&lines), "{lines} lines");
        }
        Ok(AdminCommand::ChainStart {
            participants,
            topic,
        }) => {
            assert!(!participants.is_empty() && !topic.is_empty());
        }
        Ok(AdminCommand::Approve { id, .. } | AdminCommand::Deny { id, .. }) => {
            assert!(!id.is_empty());
        }
        _ => {}
    }
}
