//! The fake Bot API checked against a real client library, python-telegram-bot (installed by
//! scripts/test-deps-python): the answers and error shapes the adapter is tested on are the ones
//! real clients read (`RetryAfter`, `BadRequest`, `InvalidToken`).

use super::*;

const PYTHON: &str = r#"
import asyncio, json, sys
from telegram import Bot
from telegram.error import BadRequest, InvalidToken, RetryAfter

async def main(base):
    out = {}
    bot = Bot("tok-snark", base_url=base + "/bot")
    async with bot:
        me = await bot.get_me()
        out["me"] = [me.id, me.username]
        try:
            await bot.send_message(chat_id=-1001234567890, text="limited")
        except RetryAfter as e:
            out["retry_after"] = int(e.retry_after.total_seconds()) if hasattr(e.retry_after, "total_seconds") else e.retry_after
        sent = await bot.send_message(chat_id=-1001234567890, text="hi", reply_parameters={"message_id": 1, "allow_sending_without_reply": True})
        out["sent"] = sent.message_id
        try:
            await bot.send_message(chat_id=-1001234567890, text="x" * 4097)
        except BadRequest as e:
            out["too_long"] = e.message
        try:
            await bot.edit_message_text(chat_id=-1001234567890, message_id=sent.message_id, text="hi")
        except BadRequest as e:
            out["not_modified"] = e.message
    try:
        async with Bot("tok-nobody", base_url=base + "/bot") as stranger:
            await stranger.get_me()
    except InvalidToken as e:
        out["invalid"] = str(e)
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"#;

#[tokio::test]
async fn python_telegram_bot_reads_the_fakes_answers() {
    let telegram = FakeTelegram::start().await;
    telegram.bot("snark", SNARK.0, SNARK.1);
    // The first post is rate limited.
    telegram.rate_limit_posts(1, 3);
    let out = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(PYTHON)
        .arg(&telegram.api_url)
        .output()
        .await
        .expect("python3 runs (python-telegram-bot comes from scripts/test-deps-python)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read["me"], serde_json::json!([SNARK.0, SNARK.1]));
    assert_eq!(read["sent"], 1);
    assert_eq!(read["retry_after"], 3);
    assert_eq!(read["too_long"], "Message is too long");
    assert!(
        read["not_modified"]
            .as_str()
            .unwrap()
            .starts_with("Message is not modified"),
        "{read}"
    );
    assert!(read["invalid"].is_string(), "{read}");
    assert_eq!(telegram.posts()[0].quotes, Some(1));
}
