//! `baton check`, and what a missing config file gets.

use super::*;

#[tokio::test]
async fn check_accepts_the_demo_and_prints_the_roster() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("check").arg("--config").arg(demo_config());
    let out = output(cmd).await;
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    for bot in ["snark", "caid", "sec"] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(bot)),
            "roster line for {bot} missing:\n{text}"
        );
        assert!(
            text.contains(&format!("local/{bot} -> bot {bot}")),
            "local account of {bot} missing:\n{text}"
        );
    }
    assert!(text.contains("config OK"), "{text}");
    assert!(
        text.contains(" echo model=") && text.contains("group_policy=open dm_policy=open"),
        "config spellings, not Rust's: {text}"
    );
}

#[tokio::test]
async fn check_honours_baton_config_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("check").env("BATON_CONFIG", demo_config());
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("snark"), "{}", show(&out));
}

/// Environment variables the broken config names. Unique to this test file, so the developer's
/// own environment cannot interfere.
pub(super) const UNSET_VAR: &str = "BATON_CLI_TEST_NEVER_SET_KEY";
pub(super) const TOKEN_VAR: &str = "BATON_CLI_TEST_API_TOKEN";
pub(super) const TOKEN_SECRET: &str = "tok-5ecret-must-never-be-printed-81c2";
pub(super) const KEY_VAR: &str = "BATON_CLI_TEST_ORACLE_KEY";
pub(super) const KEY_SECRET: &str = "sk-cli-test-also-secret-3f9d7e";

pub(super) fn broken_config() -> String {
    format!(
        r#"[gateway]
listen = "127.0.0.1:0"
api_token_env = "{TOKEN_VAR}"
lisen = "127.0.0.1:1"

[backends.openai]
api_key_env = "{UNSET_VAR}"

[[bots]]
id = "snark"
backend = "echo"

[[bots]]
id = "oracle"
backend = "openai"
model = "some-model"
api_key_env = "{KEY_VAR}"

[[bots]]
id = "snark"
backend = "echo"

[[accounts]]
bot = "ghost"
platform = "local"

[[chats]]
platform = "local"
id = "lobby-[oops"
"#
    )
}

/// The 1-based line of the first line of `text` that starts with `prefix`, after `after`.
pub(super) fn line_of(text: &str, prefix: &str, after: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(after)
        .find(|(_, l)| l.starts_with(prefix))
        .map(|(n, _)| n + 1)
        .unwrap_or_else(|| panic!("`{prefix}` not in the test config"))
}

#[tokio::test]
async fn check_lists_every_problem_with_its_key_and_never_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.toml");
    let text = broken_config();
    std::fs::write(&path, &text).unwrap();

    let second_snark = {
        let first = line_of(&text, "id = \"snark\"", 0);
        line_of(&text, "id = \"snark\"", first)
    };
    // (key, line, a word of the message): each problem names its key, and its line.
    let expected = [
        ("gateway.lisen", line_of(&text, "lisen", 0), "unknown key"),
        (
            "backends.openai.api_key_env",
            line_of(&text, &format!("api_key_env = \"{UNSET_VAR}\""), 0),
            UNSET_VAR,
        ),
        ("bots[2].id", second_snark, "unique"),
        (
            "accounts[0].bot",
            line_of(&text, "bot = \"ghost\"", 0),
            "ghost",
        ),
        (
            "chats[0].id",
            line_of(&text, "id = \"lobby-[oops\"", 0),
            "glob",
        ),
    ];

    let mut cmd = baton(dir.path());
    cmd.arg("check")
        .arg("--config")
        .arg(&path)
        .env_remove(UNSET_VAR)
        .env(TOKEN_VAR, TOKEN_SECRET)
        .env(KEY_VAR, KEY_SECRET);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    for (key, line, word) in expected {
        let found = all.lines().any(|l| {
            l.contains(&format!("{key}:"))
                && l.contains(&format!("line {line}"))
                && l.contains(word)
        });
        assert!(
            found,
            "no problem reported for `{key}` (line {line}, mentioning `{word}`):\n{all}"
        );
    }
    // The variables that are set are not problems, and their values are never echoed.
    assert!(!all.contains("gateway.api_token_env"), "{all}");
    assert!(!all.contains("bots[1].api_key_env"), "{all}");
    assert!(!all.contains(TOKEN_SECRET), "a secret leaked:\n{all}");
    assert!(!all.contains(KEY_SECRET), "a secret leaked:\n{all}");
    assert!(!all.contains("config OK"), "{all}");

    // `baton run` refuses the same config the same way, and starts nothing: no database file.
    let db = dir.path().join("never.db");
    let mut cmd = baton(dir.path());
    cmd.arg("run")
        .arg("--config")
        .arg(&path)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(&db)
        .env_remove(UNSET_VAR)
        .env(TOKEN_VAR, TOKEN_SECRET)
        .env(KEY_VAR, KEY_SECRET);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    for (key, _, _) in expected {
        assert!(
            all.contains(key),
            "`baton run` did not report {key}:\n{all}"
        );
    }
    assert!(
        !all.contains(TOKEN_SECRET) && !all.contains(KEY_SECRET),
        "{all}"
    );
    assert!(!all.contains("listening"), "{all}");
    assert!(
        !db.exists(),
        "a refused config still created {}",
        db.display()
    );
}

#[tokio::test]
async fn a_missing_config_file_says_how_to_name_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("check").arg("--config").arg("/nonexistent.toml");
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    assert!(all.contains("/nonexistent.toml"), "{all}");
    assert!(
        all.contains("--config") && all.contains("BATON_CONFIG"),
        "the message should say to pass --config or set BATON_CONFIG:\n{all}"
    );

    // Without --config or BATON_CONFIG the default is ./baton.toml; an empty directory has none.
    let mut cmd = baton(dir.path());
    cmd.arg("run").arg("--listen").arg("127.0.0.1:0");
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    assert!(all.contains("baton.toml"), "{all}");
    assert!(
        all.contains("--config") && all.contains("BATON_CONFIG"),
        "{all}"
    );
}
